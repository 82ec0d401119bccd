-- stem.debug: the student's Neovim as a view of the debug layout's gdb.
--
-- The layout's gdb runs under stem's bridge (stem-mcp gdb-bridge), which
-- serves gdb's machine interface on $STEM_SOCKDIR/g.sock inside the
-- container; agents reach the same gdb through it. This module is one more
-- client of that socket: it watches the socket directory, connects when a
-- bridge appears (and again after `stemctl debug` replaces it), follows the
-- records every client gets (*stopped, *running, =breakpoint-*,
-- =thread-selected) and sends its own commands (breakpoints, steps) as MI
-- lines. Everyone therefore sees one state: a `step` typed in the gdb pane,
-- an agent's gdb_break and a breakpoint toggled here all show in the
-- editor, the pane and the agents' tools alike.
--
-- Nothing here runs gdb console commands the student did not ask for, and
-- file names from gdb reach the editor only through buffer functions
-- (bufadd, then :buffer by number), never as text on an Ex command line.
local api, uv = vim.api, vim.loop
local mi = require('stem.mi')
local view = require('stem.view')

local M = {}

-- The state the view draws (see stem.view).
local S = {
  connected = false,
  running = nil,        -- true, false (stopped) or nil (not started, exited)
  state = 'none',       -- none | not-started | running | stopped | exited
  frame = nil,          -- { fullname, file, line, func, addr }
  bkpts = {},
  stops = 0,            -- *stopped records seen
  last_rx_ns = nil,     -- when the last *stopped record was read (uv.hrtime)
  last_sign_ns = nil,   -- when its signs were placed
}
M.state = S

local conn = { pipe = nil, connecting = false, buf = '', queue = {}, scheduled = false, token = 0, pending = {} }
local sockdir

local function notify(msg, level)
  vim.notify('stem: ' .. msg, level or vim.log.levels.INFO)
end

local function basename(p) return p and p:match('[^/]*$') or '?' end

local function status()
  local f = S.frame
  local t
  if S.state == 'none' then
    t = ''
  elseif S.state == 'not-started' then
    t = 'gdb: not started'
  elseif S.state == 'running' then
    t = 'gdb: running'
  elseif S.state == 'exited' then
    t = 'gdb: exited' .. (S.exit and (' ' .. S.exit) or '')
  elseif f and f.fullname and f.line then
    t = string.format('gdb: %s%s %s:%d', S.why and (S.why .. ' ') or '', f.func or '?', basename(f.file or f.fullname), f.line)
  elseif f then
    t = string.format('gdb: %s%s in %s (no source)', S.why and (S.why .. ' ') or '', f.addr or '?', f.func or '??')
  else
    t = 'gdb: stopped'
  end
  view.set_status(t)
end

-- send writes one MI command; cb(rec, console) gets its result record and
-- the console text it produced. Errors without cb are shown.
function M.send(cmd, cb)
  if not conn.pipe then
    notify('no debugger to talk to: open the debug layout (stemctl debug) first', vim.log.levels.WARN)
    return false
  end
  conn.token = conn.token + 1
  local tok = tostring(conn.token)
  conn.pending[tok] = { cb = cb, console = {} }
  conn.pipe:write(tok .. cmd .. '\n')
  return true
end

local function frame_of(t)
  if type(t) ~= 'table' then return nil end
  return { fullname = t.fullname, file = t.file, line = tonumber(t.line), func = t.func, addr = t.addr }
end

local function set_bkpt(b)
  if type(b) ~= 'table' or not b.number then return end
  local locs = {}
  if type(b.locations) == 'table' and #b.locations > 0 then
    for _, l in ipairs(b.locations) do
      if l.fullname and l.enabled ~= 'n' then locs[#locs + 1] = { file = l.fullname, line = tonumber(l.line) } end
    end
  elseif b.fullname then
    locs[1] = { file = b.fullname, line = tonumber(b.line) }
  end
  S.bkpts[b.number] = { enabled = b.enabled ~= 'n', locs = locs, temporary = b.disp == 'del' }
end

local stop_words = { ['breakpoint-hit'] = 'breakpoint', ['watchpoint-trigger'] = 'watchpoint' }

local registers_hook

local function on_stopped(r, rx)
  local reason = r.reason or ''
  if reason:match('^exited') then
    S.state, S.running, S.frame = 'exited', nil, nil
    S.exit = r['exit-code'] and ('with ' .. tonumber(r['exit-code'], 8)) or (r['signal-name'] and ('by ' .. r['signal-name'])) or nil
    view.refresh_all()
    status()
    return
  end
  S.state, S.running = 'stopped', false
  S.frame = frame_of(r.frame)
  S.why = r['signal-name'] or stop_words[reason]
  if S.why == 'breakpoint' and r.bkptno then S.why = 'breakpoint ' .. r.bkptno .. ':' end
  S.stops = S.stops + 1
  view.refresh_all()
  S.last_rx_ns, S.last_sign_ns = rx, uv.hrtime()
  status()
  if S.frame and S.frame.fullname and S.frame.line then view.follow() end
  if registers_hook then registers_hook() end
end

local function dispatch(rec, rx)
  if rec.token and conn.pending[rec.token] then
    local p = conn.pending[rec.token]
    if rec.kind == 'console' then
      p.console[#p.console + 1] = rec.text
      return
    elseif rec.kind == 'result' then
      conn.pending[rec.token] = nil
      if p.cb then
        p.cb(rec, table.concat(p.console))
      elseif rec.class == 'error' then
        notify(rec.results.msg or 'gdb refused the command', vim.log.levels.ERROR)
      end
      return
    end
  end
  local r = rec.results
  if rec.kind == 'exec' and rec.class == 'running' then
    S.state, S.running = 'running', true
    view.refresh_all()
    status()
  elseif rec.kind == 'exec' and rec.class == 'stopped' then
    on_stopped(r, rx)
  elseif rec.kind == 'notify' then
    local c = rec.class
    if c == 'breakpoint-created' or c == 'breakpoint-modified' then
      set_bkpt(r.bkpt)
      view.refresh_all()
    elseif c == 'breakpoint-deleted' then
      S.bkpts[r.id or ''] = nil
      view.refresh_all()
    elseif c == 'thread-selected' and r.frame and S.running == false then
      S.frame = frame_of(r.frame)
      view.refresh_all()
      status()
      if S.frame.fullname then view.follow() end
    elseif c == 'thread-group-exited' then
      S.state, S.running, S.frame = 'exited', nil, nil
      S.exit = r['exit-code'] and ('with ' .. tonumber(r['exit-code'], 8)) or nil
      view.refresh_all()
      status()
    end
  end
end

local function drain()
  conn.scheduled = false
  local q = conn.queue
  conn.queue = {}
  for _, item in ipairs(q) do
    local ok, err = pcall(dispatch, item[1], item[2])
    if not ok then notify('internal error: ' .. tostring(err), vim.log.levels.ERROR) end
  end
end

local function disconnected()
  conn.pipe, conn.buf, conn.pending, conn.queue = nil, '', {}, {}
  S.connected, S.state, S.running, S.frame, S.bkpts = false, 'none', nil, nil, {}
  view.refresh_all()
  status()
  M.connect() -- a new bridge may be waiting already
end

-- on_read runs in libuv's callback (a "fast" context): it only parses and
-- queues; the queue is handled on the main loop.
local function on_read(err, data)
  if err or not data then
    if conn.pipe then conn.pipe:close() end
    vim.schedule(disconnected)
    return
  end
  local rx = uv.hrtime()
  conn.buf = conn.buf .. data
  while true do
    local nl = conn.buf:find('\n', 1, true)
    if not nl then break end
    local line = conn.buf:sub(1, nl - 1)
    conn.buf = conn.buf:sub(nl + 1)
    local rec = mi.parse(line)
    if rec then conn.queue[#conn.queue + 1] = { rec, rx } end
  end
  if #conn.buf > 64 * 1024 * 1024 then conn.buf = '' end
  if #conn.queue > 0 and not conn.scheduled then
    conn.scheduled = true
    vim.schedule(drain)
  end
end

local function connected()
  S.connected, S.state = true, 'not-started'
  M.send('-stem-client editor', function() end)
  M.send('-break-list', function(rec)
    local tbl = rec.results.BreakpointTable
    if type(tbl) == 'table' and type(tbl.body) == 'table' then
      for _, b in ipairs(tbl.body) do set_bkpt(b) end
    end
    view.refresh_all()
  end)
  M.send('-thread-info', function(rec)
    if rec.class ~= 'done' then return end
    for _, t in ipairs(type(rec.results.threads) == 'table' and rec.results.threads or {}) do
      if t.id == rec.results['current-thread-id'] then
        if t.state == 'running' then
          S.state, S.running = 'running', true
        elseif S.state == 'not-started' then
          -- The stop that happened before we connected.
          on_stopped({ frame = t.frame }, uv.hrtime())
          return
        end
      end
    end
    status()
  end)
  status()
end

-- connect dials g.sock when it is there and we are not connected.
function M.connect()
  if conn.pipe or conn.connecting or not sockdir then return end
  local path = sockdir .. '/g.sock'
  local st = uv.fs_lstat(path)
  if not st or st.type ~= 'socket' then return end
  conn.connecting = true
  local pipe = uv.new_pipe(false)
  pipe:connect(path, function(err)
    conn.connecting = false
    if err then
      pipe:close()
      return
    end
    conn.pipe = pipe
    pipe:read_start(on_read)
    vim.schedule(connected)
  end)
end

function M.set_registers_hook(f) registers_hook = f end

M.add_bkpt = set_bkpt

-- info is for tests and curious students: the state as plain data.
function M.info()
  local bps = {}
  for n, b in pairs(S.bkpts) do bps[#bps + 1] = { number = n, enabled = b.enabled, locs = b.locs } end
  return {
    connected = S.connected, state = S.state, frame = S.frame, breakpoints = bps, stops = S.stops,
    pending_jump = view.pending('frame'), status = vim.g.stem_debug_status or '',
    last_rx_ns = S.last_rx_ns, last_sign_ns = S.last_sign_ns,
  }
end

function M.setup(dir)
  sockdir = dir
  view.attach(S)
  view.define()
  view.statusline()
  require('stem.commands').setup(M)
  local group = api.nvim_create_augroup('stem_debug', { clear = true })
  api.nvim_create_autocmd({ 'BufReadPost', 'BufWinEnter' }, { group = group, callback = function(a)
    if S.connected then view.refresh(a.buf) end
  end })
  M.connect()
end

return M
