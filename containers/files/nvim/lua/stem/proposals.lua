-- stem.proposals: edits an agent or a teacher proposes, under a task whose
-- agent policy is edits = "propose". stem-mcp's nvim_buffer_edit calls
-- create() over n.sock instead of changing the buffer; the student sees
-- each change as a diff in the buffer (the old lines marked, the new ones
-- as virtual lines below them, headed by who proposed it).
--
-- The decision is taken on the host, never here: everything in this
-- editor (its commands, this Lua, n.sock) is reachable from code in the
-- container. The student accepts or rejects with
--
--   stemctl proposals accept ID [--hunk N]   /   stemctl proposals reject ID
--
-- which applies the change from the host and then tells this plugin
-- (settle) to stop showing it. Here:
--
--   :StemProposals            list the proposals and their state    \pl
--   :StemAccept [id | id.N]   ask to accept (shows the host command) \pA (all) \pa (hunk)
--   :StemReject [id | id.N]   ask to reject                          \pr (all) \pR (hunk)
--
-- A request is only a note the host may show; it decides nothing.
-- Without an id the commands act on the proposal (or hunk) under the
-- cursor. Keys are mapped only where the student has no mapping of their
-- own, and not at all with `let g:stem_proposal_keys = 0`.
--
-- Each hunk is anchored by an extmark, so it follows the student's edits
-- above it; the host uses the anchor only as a hint and checks the old
-- lines itself. Proposal text is data: it is shown with control
-- characters made visible and with bounded size.
local api = vim.api
local fit = require('stem.fit')
local M = {}

local NS = api.nvim_create_namespace('stem-proposal')      -- anchors
local VIEW = api.nvim_create_namespace('stem-proposal-view') -- what is shown

-- Bounds: what a proposal may hold, and how much of it is shown.
M.MAX_BYTES = 2 * 1024 * 1024
M.MAX_LINES = 100000
M.MAX_OPEN = 200    -- proposals kept per editor
M.MAX_HUNKS = 500
local SHOW_LINES, SHOW_COLS, WHO_COLS = 40, 200, 60

local S = { seq = 0, list = {}, order = {} }

-- shown makes text displayable and inert: control characters as ^X, cut
-- to n bytes (never inside a UTF-8 sequence).
local function shown(s, n)
  s = tostring(s or '')
  local cut = false
  if #s > n then
    local i = n
    while i > 0 and s:byte(i + 1) and s:byte(i + 1) >= 0x80 and s:byte(i + 1) < 0xC0 do i = i - 1 end
    s, cut = s:sub(1, i), true
  end
  s = s:gsub('%c', function(c)
    local b = c:byte()
    if b == 127 then return '^?' end
    return '^' .. string.char(b + 64)
  end)
  -- C1 controls and bidirectional overrides, which would make the line
  -- read differently from what it is.
  s = s:gsub('\194([\128-\159])', function(c) return string.format('<%02x>', c:byte()) end)
  s = s:gsub('\226\128([\170-\174])', '<bidi>'):gsub('\226\129([\166-\169])', '<bidi>')
  if cut then s = s .. '…' end
  return s
end
M.shown = shown

local function state_of(p)
  local acc, stale, pending = 0, 0, 0
  for _, h in ipairs(p.hunks) do
    if h.state == 'accepted' then acc = acc + 1
    elseif h.state == 'stale' then stale = stale + 1
    elseif h.state == 'pending' then pending = pending + 1 end
  end
  if pending > 0 then return 'pending' end
  if acc == #p.hunks then return 'accepted' end
  if acc > 0 then return 'partially_accepted' end
  if stale > 0 then return 'stale' end
  return 'rejected'
end

local function valid(p) return api.nvim_buf_is_valid(p.buf) and api.nvim_buf_is_loaded(p.buf) end

-- where is the 0-based row a hunk's anchor is at now, or nil.
local function where(p, h)
  if not valid(p) then return nil end
  local m = api.nvim_buf_get_extmark_by_id(p.buf, NS, h.mark, {})
  return m[1]
end

-- intact checks that the hunk's lines are still those it was made on, at
-- its anchor: the old lines it replaces, or the line an insertion follows
-- (precedes, at the top of the buffer).
local function intact(p, h)
  local row = where(p, h)
  if not row then return nil end
  local want = h.old
  if #h.old == 0 then want = { h.ctx } end
  if row + #want > api.nvim_buf_line_count(p.buf) then return nil end
  local have = api.nvim_buf_get_lines(p.buf, row, row + #want, true)
  for i = 1, #want do
    if have[i] ~= want[i] then return nil end
  end
  return row
end

-- check marks the pending hunks whose lines changed as stale. On typing
-- (eager) it skips hunks of more than EAGER_LINES old lines, so a large
-- proposal does not slow every key; those are checked when listed, asked
-- about or decided, which is where it counts.
local EAGER_LINES = 200
local function check(p, eager)
  for _, h in ipairs(p.hunks) do
    if h.state == 'pending' and not (eager and #h.old > EAGER_LINES) and not intact(p, h) then h.state = 'stale' end
  end
  p.state = state_of(p)
end

local function keys_hint()
  return 'decide on the host: stemctl proposals accept|reject ID [--hunk N]  (\\pl list)'
end

-- draw shows the pending hunks of every proposal on buf.
local function draw(buf)
  if not api.nvim_buf_is_valid(buf) then return end
  api.nvim_buf_clear_namespace(buf, VIEW, 0, -1)
  local w = fit.width(buf)
  for _, id in ipairs(S.order) do
    local p = S.list[id]
    if p and p.buf == buf then
      local n = #p.hunks
      for k, h in ipairs(p.hunks) do
        local row = h.state == 'pending' and where(p, h)
        if row then
          local head = string.format('stem: proposal %s.%d of %d by %s  %s', p.id, k, n, p.who, keys_hint())
          local virt = {}
          for _, l in ipairs(fit.lines(head, w, 3)) do virt[#virt + 1] = { { l, 'StemProposalHead' } } end
          for i, l in ipairs(h.new) do
            if i > SHOW_LINES then
              virt[#virt + 1] = { { string.format('+ … %d more lines (%d bytes)', #h.new - SHOW_LINES, h.bytes), 'StemProposalHead' } }
              break
            end
            virt[#virt + 1] = { { '+ ' .. shown(l, SHOW_COLS), 'StemProposalAdd' } }
          end
          if #h.new == 0 then virt[#virt + 1] = { { '  (the marked lines are deleted)', 'StemProposalHead' } } end
          if #h.old > 0 then
            local last = row + #h.old - 1
            local len = #(api.nvim_buf_get_lines(buf, last, last + 1, true)[1] or '')
            api.nvim_buf_set_extmark(buf, VIEW, row, 0, { end_row = last, end_col = len, hl_group = 'StemProposalDel', hl_eol = true, priority = 150 })
            api.nvim_buf_set_extmark(buf, VIEW, row, 0, { sign_text = '-~', sign_hl_group = 'StemProposalDel' })
            api.nvim_buf_set_extmark(buf, VIEW, last, 0, { virt_lines = virt })
          else
            -- an insertion goes below its anchor line (above it at the
            -- top of the buffer)
            api.nvim_buf_set_extmark(buf, VIEW, row, 0, { virt_lines = virt, virt_lines_above = h.before or false })
          end
        end
      end
    end
  end
end

-- announce tells the student a proposal arrived: who, where (it may be
-- off-screen, or in a buffer no window shows) and where to answer. It
-- only shows a message: the cursor and the windows stay as they are.
-- The message fits the command line, or Neovim would stop at a Press
-- ENTER prompt and the student's next key would go to it.
local function announce(p)
  local row = p.hunks[1] and where(p, p.hunks[1])
  if not row then return end
  local line = row + 1
  local place, short = '', ''
  local win = vim.fn.bufwinid(p.buf)
  if win == -1 then
    place, short = ' (hidden: :buffer ' .. p.buf .. ')', ' (:b ' .. p.buf .. ')'
  else
    local top = vim.fn.line('w0', win)
    local bot = vim.fn.line('w$', win)
    if line < top then place = ' (above)' elseif line > bot then place = ' (below)' end
    short = place
  end
  local room = math.max((vim.v.echospace or (vim.o.columns - 12)) - 1, 20)
  local name = p.name == '' and '[No Name]' or shown(vim.fn.fnamemodify(p.name, ':~:.'), 120)
  local base = fit.clip(p.name == '' and '[No Name]' or shown(vim.fn.fnamemodify(p.name, ':t'), 60), 16)
  local forms = {
    string.format('stem: %s proposes a change to %s:%d%s · answer on the host: stemctl proposals', p.who, name, line, place),
    string.format('stem: proposal %s by %s at %s:%d%s · stemctl proposals', p.id, p.who, base, line, place),
    string.format('stem: %s by %s at %s:%d%s: stemctl proposals', p.id, fit.clip(p.who, 16), base, line, short),
    string.format('stem: %s at %s:%d%s: stemctl proposals', p.id, base, line, short),
  }
  local text
  for _, f in ipairs(forms) do
    text = f
    if vim.fn.strdisplaywidth(f) <= room then break end
  end
  api.nvim_echo({ { fit.clip(text, room), 'StemProposalHead' } }, true, {})
end

-- redraw shows again every buffer with a pending proposal (the windows'
-- widths changed).
local function redraw()
  local bufs = {}
  for _, id in ipairs(S.order) do
    local p = S.list[id]
    if p and p.state == 'pending' and valid(p) then bufs[p.buf] = true end
  end
  for b in pairs(bufs) do draw(b) end
end

local function define()
  if M.defined then return end
  M.defined = true
  vim.cmd([[
    highlight default link StemProposalDel DiffDelete
    highlight default link StemProposalAdd DiffAdd
    highlight default link StemProposalHead DiagnosticHint
  ]])
end

-- create(buf, first, last, lines, who, token): a proposal to replace
-- lines first..last (1-based, inclusive; last = first-1 inserts before
-- first) of buf with lines. Returns {id, hunks} or {err}.
function M.create(buf, first, last, lines, who, token)
  M.setup()
  if type(buf) ~= 'number' or not api.nvim_buf_is_valid(buf) then return { err = 'nobuffer' } end
  if not api.nvim_buf_is_loaded(buf) then return { err = 'notloaded' } end
  local bt = api.nvim_buf_get_option(buf, 'buftype')
  if bt ~= '' then return { err = 'buftype', buftype = bt } end
  if not api.nvim_buf_get_option(buf, 'modifiable') then return { err = 'nomodifiable' } end
  local total = api.nvim_buf_line_count(buf)
  if type(first) ~= 'number' or type(last) ~= 'number' or first < 1 or first > total + 1 or last < first - 1 or last > total then
    return { err = 'range', total = total }
  end
  if type(lines) ~= 'table' or #lines > M.MAX_LINES then return { err = 'toolarge' } end
  local size = 0
  for _, l in ipairs(lines) do
    if type(l) ~= 'string' or l:find('[\n\r]') then return { err = 'badline' } end
    size = size + #l + 1
  end
  if size > M.MAX_BYTES then return { err = 'toolarge' } end
  local open = 0
  for _, p in pairs(S.list) do
    if p.state == 'pending' then open = open + 1 end
  end
  if open >= M.MAX_OPEN then return { err = 'toomany' } end
  local old = api.nvim_buf_get_lines(buf, first - 1, last, true)
  local a = #old > 0 and table.concat(old, '\n') .. '\n' or ''
  local b = #lines > 0 and table.concat(lines, '\n') .. '\n' or ''
  local idx = vim.diff(a, b, { result_type = 'indices' })
  if #idx == 0 then return { err = 'nochange' } end
  if #idx > M.MAX_HUNKS then idx = { { 1, #old, 1, #lines } } end -- one hunk, then
  S.seq = S.seq + 1
  local p = { id = 'p' .. S.seq, token = token, who = shown(who, WHO_COLS), buf = buf, hunks = {}, state = 'pending',
    name = api.nvim_buf_get_name(buf) }
  for _, d in ipairs(idx) do
    local sa, ca, sb, cb = d[1], d[2], d[3], d[4]
    local h = { state = 'pending', old = {}, new = {}, sb = cb > 0 and sb or sb + 1, cb = cb, bytes = 0, sa = sa }
    for i = sb, sb + cb - 1 do
      h.new[#h.new + 1] = lines[i]
      h.bytes = h.bytes + #lines[i] + 1
    end
    local row -- 0-based anchor row
    if ca > 0 then
      row = first - 1 + sa - 1
      for i = sa, sa + ca - 1 do h.old[#h.old + 1] = old[i] end
    else
      -- an insertion after line sa of the range (0: before it)
      local after = first - 1 + sa -- 1-based line the new lines follow
      if after >= 1 then
        row = after - 1
      else
        row, h.before = 0, true
      end
      h.ctx = api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
    end
    -- right gravity: lines the student adds above the hunk push it down.
    h.mark = api.nvim_buf_set_extmark(buf, NS, row, 0, { right_gravity = true })
    p.hunks[#p.hunks + 1] = h
  end
  S.list[p.id] = p
  S.order[#S.order + 1] = p.id
  -- Settled proposals are kept for status until there are too many.
  while #S.order > M.MAX_OPEN do
    local drop
    for i, oid in ipairs(S.order) do
      if S.list[oid].state ~= 'pending' then drop = i; break end
    end
    if not drop then break end
    S.list[table.remove(S.order, drop)] = nil
  end
  draw(buf)
  announce(p)
  local hs = {}
  for k, h in ipairs(p.hunks) do hs[k] = { sb = h.sb, cb = h.cb, old = #h.old, sa = h.sa } end
  return { id = p.id, hunks = hs, tick = api.nvim_buf_get_changedtick(buf) }
end

-- request notes that the student asked, in the editor, to accept or
-- reject hunk k of p (all when k is nil). It changes nothing: the host
-- decides (stemctl proposals), and may show the request.
local function request(p, k, accept)
  p.request = { accept = accept, hunk = k, at = os.time() }
  local what = k and string.format('%s --hunk %d', p.id, k) or p.id
  -- one short line: a longer one would stop Neovim at a Press ENTER prompt
  vim.notify(string.format('stem: answer on the host or run: stemctl proposals %s %s',
    accept and 'accept' or 'reject', what))
end

-- at finds the proposal (and hunk) under the cursor.
local function at_cursor()
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local best, bk, bd
  for _, id in ipairs(S.order) do
    local p = S.list[id]
    if p and p.buf == buf and p.state == 'pending' then
      for k, h in ipairs(p.hunks) do
        local r = h.state == 'pending' and where(p, h)
        if r then
          local last = r + math.max(#h.old, 1) - 1
          local d = row < r and r - row or (row > last and row - last or 0)
          if d == 0 then return p, k end
          if bd == nil or d < bd then best, bk, bd = p, k, d end
        end
      end
    end
  end
  if best and bd <= 1 then return best, bk end
  return nil
end

local function parse(arg)
  arg = vim.trim(arg or '')
  if arg == '' then return at_cursor() end
  local id, k = arg:match('^(p%d+)%.(%d+)$')
  if not id then id = arg:match('^(p%d+)$') end
  local p = id and S.list[id]
  if not p then return nil, 'no proposal ' .. shown(arg, 20) .. ' (see :StemProposals)' end
  k = tonumber(k)
  if k and not p.hunks[k] then return nil, string.format('proposal %s has %d hunks', p.id, #p.hunks) end
  return p, k
end

local function command(accept, whole)
  return function(a)
    local p, k = parse(a.args)
    if not p then
      vim.notify('stem: ' .. (k or 'no proposal under the cursor (see :StemProposals)'), vim.log.levels.WARN)
      return
    end
    if whole and a.args == '' then k = nil end
    request(p, k, accept)
  end
end

-- list returns the proposals as lines for :StemProposals.
function M.lines()
  local out = {}
  for _, id in ipairs(S.order) do
    local p = S.list[id]
    if p then
      if p.state == 'pending' then check(p) end
      local row = p.hunks[1] and where(p, p.hunks[1])
      local name = valid(p) and vim.fn.fnamemodify(api.nvim_buf_get_name(p.buf), ':~:.') or '(closed buffer)'
      local pend = 0
      for _, h in ipairs(p.hunks) do if h.state == 'pending' then pend = pend + 1 end end
      out[#out + 1] = string.format('%-5s %-18s by %s  %s:%s  %d hunk(s), %d open', p.id, p.state, p.who,
        shown(name, 80), row and tostring(row + 1) or '?', #p.hunks, pend)
    end
  end
  if #out == 0 then out[1] = 'stem: no proposals' end
  return out
end

-- status(id, token) is what the host learns: the state of each hunk, and
-- where accepted ones landed. The token ties the id to its proposer (ids
-- start again in a restarted editor).
function M.status(id, token)
  local p = S.list[id]
  if not p or p.token ~= token then return { err = 'unknown' } end
  if p.state == 'pending' then
    check(p)
    if valid(p) then draw(p.buf) end
  end
  local hs = {}
  for k, h in ipairs(p.hunks) do hs[k] = { state = h.state, at = h.at or 0 } end
  local req = ''
  if p.request then
    req = (p.request.accept and 'accept' or 'reject') .. (p.request.hunk and ('.' .. p.request.hunk) or '')
  end
  return { id = p.id, state = p.state, hunks = hs, request = req, tick = valid(p) and api.nvim_buf_get_changedtick(p.buf) or 0 }
end

-- unrequest forgets the student's request once the host has asked them
-- about it.
function M.unrequest(id, token)
  local p = S.list[id]
  if not p or p.token ~= token then return { err = 'unknown' } end
  p.request = nil
  return { id = id }
end

-- rows(id, token) is where each pending hunk's anchor is now (0-based
-- row, or false): a hint for the host, which checks the lines itself.
function M.rows(id, token)
  local p = S.list[id]
  if not p or p.token ~= token then return {} end
  local out = {}
  for k, h in ipairs(p.hunks) do out[k] = (h.state == 'pending' and where(p, h)) or false end
  return out
end

-- settle(id, token, states) is the host's decision, after it applied
-- it: each hunk's state, shown no more.
function M.settle(id, token, states)
  local p = S.list[id]
  if not p or p.token ~= token or type(states) ~= 'table' then return { err = 'unknown' } end
  for k, h in ipairs(p.hunks) do
    local st = states[k]
    if h.state == 'pending' and (st == 'accepted' or st == 'rejected' or st == 'stale') then
      h.state = st
      if valid(p) then pcall(api.nvim_buf_del_extmark, p.buf, NS, h.mark) end
    end
  end
  p.state = state_of(p)
  p.request = nil
  if valid(p) then draw(p.buf) end
  return { id = id, state = p.state }
end

-- withdraw removes a proposal its maker could not put on record, as if
-- it had never been made.
function M.withdraw(id, token)
  local p = S.list[id]
  if not p or p.token ~= token then return { err = 'unknown' } end
  if valid(p) then
    for _, h in ipairs(p.hunks) do pcall(api.nvim_buf_del_extmark, p.buf, NS, h.mark) end
  end
  S.list[id] = nil
  for i, oid in ipairs(S.order) do
    if oid == id then table.remove(S.order, i); break end
  end
  if valid(p) then draw(p.buf) end
  return { id = id }
end

function M.setup()
  if M.ready then return end
  M.ready = true
  define()
  api.nvim_create_user_command('StemProposals', function()
    local chunks = {}
    for _, l in ipairs(M.lines()) do chunks[#chunks + 1] = { l .. '\n' } end
    chunks[#chunks + 1] = { keys_hint() }
    api.nvim_echo(chunks, false, {})
  end, { desc = 'stem: proposed edits' })
  api.nvim_create_user_command('StemAccept', command(true, true), { nargs = '?', desc = 'stem: accept a proposal or hunk' })
  api.nvim_create_user_command('StemReject', command(false, true), { nargs = '?', desc = 'stem: reject a proposal or hunk' })
  if vim.g.stem_proposal_keys ~= 0 then
    local function hunk(accept)
      return function()
        local p, k = at_cursor()
        if not p then
          vim.notify('stem: no proposal under the cursor (see :StemProposals)', vim.log.levels.WARN)
          return
        end
        request(p, k, accept)
      end
    end
    local keys = {
      ['<Leader>pa'] = hunk(true), ['<Leader>pR'] = hunk(false),
      ['<Leader>pA'] = '<Cmd>StemAccept<CR>', ['<Leader>pr'] = '<Cmd>StemReject<CR>',
      ['<Leader>pl'] = '<Cmd>StemProposals<CR>',
    }
    for lhs, rhs in pairs(keys) do
      if vim.fn.maparg(lhs, 'n') == '' then vim.keymap.set('n', lhs, rhs, { desc = 'stem proposals' }) end
    end
  end
  -- A change under a pending hunk makes it stale at once, so what the
  -- student sees never offers a change to lines that are gone.
  local group = api.nvim_create_augroup('stem_proposals', { clear = true })
  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    callback = function(ev)
      local touched = false
      for _, id in ipairs(S.order) do
        local p = S.list[id]
        if p and p.buf == ev.buf and p.state == 'pending' then
          check(p, true)
          touched = true
        end
      end
      if touched then draw(ev.buf) end
    end,
  })
  api.nvim_create_autocmd({ 'VimResized', 'WinEnter', 'BufWinEnter' }, { group = group, callback = redraw })
end

-- info is for tests: the proposals' state without the text.
function M.info()
  local out = {}
  for _, id in ipairs(S.order) do
    local p = S.list[id]
    local hs = {}
    for k, h in ipairs(p.hunks) do hs[k] = h.state end
    local req = p.request and ((p.request.accept and 'accept' or 'reject') .. (p.request.hunk and ('.' .. p.request.hunk) or '')) or ''
    out[#out + 1] = { id = p.id, state = p.state, who = p.who, hunks = hs, request = req }
  end
  return out
end

return M
