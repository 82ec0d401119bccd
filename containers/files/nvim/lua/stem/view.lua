-- stem.view: what the editor shows of the debugger: a sign and a line
-- highlight on the selected frame's line, signs on breakpoints, a few words
-- for the status line, and moving the editor to the frame.
--
-- The student may be typing when the program stops (an agent stepped, or
-- the student typed `step` in the gdb pane a moment ago): signs and the
-- status change at once, but the cursor moves only when the editor is idle:
-- in Normal mode with no operator, count or register pending. Otherwise the
-- move waits until the editor has been idle for g:stem_debug_idle_ms
-- (default 1000) without a key, or for :StemFrame. A window holding
-- unsaved changes is never given another buffer: the frame's file opens in
-- a split above it.
local api, fn, uv = vim.api, vim.fn, vim.loop
local M = {}

local GROUP = 'stem'
local PRIO_BREAK, PRIO_PC = 20, 30

function M.define()
  vim.cmd([[
    highlight default StemPCLine ctermbg=24 guibg=#1f3b57
    highlight default StemPCSign ctermfg=226 cterm=bold guifg=#ffff00 gui=bold
    highlight default StemBreakSign ctermfg=196 guifg=#ff3030
    highlight default StemBreakOffSign ctermfg=244 guifg=#808080
    highlight default StemRegChanged ctermfg=226 cterm=bold guifg=#ffff00 gui=bold
  ]])
  fn.sign_define('StemPC', { text = '=>', texthl = 'StemPCSign', linehl = 'StemPCLine' })
  fn.sign_define('StemPCBreak', { text = '●>', texthl = 'StemBreakSign', linehl = 'StemPCLine' })
  fn.sign_define('StemBreak', { text = '●', texthl = 'StemBreakSign' })
  fn.sign_define('StemBreakOff', { text = '○', texthl = 'StemBreakOffSign' })
end

-- realpath of a file name, cached: gdb names a file the way it was compiled,
-- the editor the way it was opened.
local real = {}
local function canon(name)
  if not name or name == '' then return nil end
  local r = real[name]
  if r == nil then
    r = uv.fs_realpath(name) or name
    real[name] = r
  end
  return r
end
M.canon = canon

-- state is stem.debug's: frame = { fullname, line, func, addr }, bkpts =
-- { [number] = { enabled, locs = { { file, line } } } }.
local state

function M.attach(s) state = s end

-- refresh places the signs of one loaded buffer.
local function refresh(buf)
  fn.sign_unplace(GROUP, { buffer = buf })
  local name = canon(api.nvim_buf_get_name(buf))
  if not name or not state then return end
  local lines = api.nvim_buf_line_count(buf)
  local marks = {}
  for _, bp in pairs(state.bkpts) do
    for _, loc in ipairs(bp.locs) do
      if loc.line and loc.line <= lines and canon(loc.file) == name then
        marks[loc.line] = marks[loc.line] or bp.enabled
      end
    end
  end
  local f = state.frame
  local pc = state.running == false and f and f.line and canon(f.fullname) == name and f.line <= lines and f.line or nil
  for line, enabled in pairs(marks) do
    if line ~= pc then
      fn.sign_place(0, GROUP, enabled and 'StemBreak' or 'StemBreakOff', buf, { lnum = line, priority = PRIO_BREAK })
    end
  end
  if pc then
    fn.sign_place(0, GROUP, marks[pc] ~= nil and 'StemPCBreak' or 'StemPC', buf, { lnum = pc, priority = PRIO_PC })
  end
end
M.refresh = refresh

function M.refresh_all()
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(b) then refresh(b) end
  end
end

-- status is the status line's text for the debugger (g:stem_debug_status).
function M.set_status(text)
  if vim.g.stem_debug_status ~= text then
    vim.g.stem_debug_status = text
    vim.cmd('redrawstatus!')
  end
end

-- The default status line with the debugger's words before the ruler. Only
-- an unset 'statusline' is replaced: a student's own keeps precedence (add
-- %{get(g:,'stem_debug_status','')} to it).
function M.statusline()
  if vim.o.statusline == '' then
    vim.o.statusline = "%<%f %h%m%r%=%{get(g:,'stem_debug_status','')}  %-14.(%l,%c%V%) %P"
  end
end

-- idle: Normal mode, no operator, count or register pending.
function M.idle()
  local m = api.nvim_get_mode()
  return m.mode == 'n' and not m.blocking
end

-- Deferred work runs once the editor is idle and no key came for a while.
-- The wait is a libuv timer whose callback only reads the mode (a "fast"
-- API call) and the time of the last key: nothing reaches the main loop
-- until the work is due, so a deferred jump does not hold off CursorHold or
-- anything else that waits for a quiet editor.
local last_key = uv.now()
local deferred, timer = {}, nil

function M.on_key() last_key = uv.now() end

local function idle_ms()
  local v = tonumber(vim.g.stem_debug_idle_ms)
  return v and v >= 0 and v or 1000
end

-- when_idle runs fn (named key; a later one replaces it) once the student
-- is idle, at once if they are.
function M.when_idle(key, fn)
  if M.idle() and uv.now() - last_key >= idle_ms() then
    deferred[key] = nil
    fn()
    return
  end
  deferred[key] = fn
  if timer then return end
  timer = uv.new_timer()
  local limit = idle_ms()
  timer:start(100, 100, function()
    if not next(deferred) then
      timer:stop()
      timer:close()
      timer = nil
      return
    end
    if uv.now() - last_key < limit then return end
    local m = api.nvim_get_mode()
    if m.mode ~= 'n' or m.blocking then return end
    local todo = deferred
    deferred = {}
    vim.schedule(function()
      for _, f in pairs(todo) do f() end
    end)
  end)
end

function M.cancel(key) deferred[key] = nil end

function M.pending(key) return deferred[key] ~= nil end

local function normal_window(win)
  local buf = api.nvim_win_get_buf(win)
  return api.nvim_win_get_config(win).relative == '' and vim.bo[buf].buftype == ''
end

-- target picks the window for file: one that shows it already, else the
-- current window if it is an ordinary one, else any ordinary window.
local function target(file)
  local cur = api.nvim_get_current_win()
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if canon(api.nvim_buf_get_name(api.nvim_win_get_buf(w))) == file and normal_window(w) then return w end
  end
  if normal_window(cur) then return cur end
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if normal_window(w) then return w end
  end
  return nil
end

-- bufadd returns file's listed buffer, named relative to the working
-- directory where it is below it (as :edit would name it).
function M.bufadd(file)
  local b = fn.bufadd(fn.fnamemodify(file, ':.'))
  vim.bo[b].buflisted = true
  return b
end

-- set_buf puts buf in win as :buffer would, except that a swap file left
-- by an editor that died editing the file is not answered here (the
-- student decides, with :b NAME): it returns false and a message.
function M.set_buf(win, buf)
  local swapped = false
  local au = api.nvim_create_autocmd('SwapExists', { callback = function()
    swapped = true
    vim.v.swapchoice = 'q'
  end })
  -- :buffer by number (no name reaches the command line) asks about a
  -- swap file through SwapExists; nvim_win_set_buf would print the whole
  -- ATTENTION text and wait for Enter.
  local ok, err = pcall(api.nvim_win_call, win, function() vim.cmd('buffer ' .. buf) end)
  pcall(api.nvim_del_autocmd, au)
  if swapped then
    return false, fn.fnamemodify(api.nvim_buf_get_name(buf), ':.') .. ' has a swap file (an editor died editing it): open it with :b to recover or edit it'
  end
  if not ok then return false, tostring(err) end
  return true
end

-- show puts file's buffer in a window (never over unsaved changes) and
-- the cursor on line. It returns the window, or nil.
function M.show(file, line)
  local win = target(canon(file))
  if not win then return nil end
  local buf = M.bufadd(file)
  local cur = api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) ~= buf then
    local ok, err
    if vim.bo[api.nvim_win_get_buf(win)].modified then
      -- Open a split above it, then give the student their window back.
      api.nvim_set_current_win(win)
      vim.cmd('aboveleft split')
      local split = api.nvim_get_current_win()
      ok, err = M.set_buf(split, buf)
      if not ok then api.nvim_win_close(split, true) end
      api.nvim_set_current_win(cur)
      win = split
    else
      ok, err = M.set_buf(win, buf)
    end
    if not ok then
      vim.notify('stem: ' .. err, vim.log.levels.WARN)
      return nil
    end
  end
  if line then
    if win == cur then vim.cmd("normal! m'") end
    line = math.max(1, math.min(line, api.nvim_buf_line_count(buf)))
    local shown = api.nvim_win_call(win, function() return { fn.line('w0'), fn.line('w$') } end)
    api.nvim_win_set_cursor(win, { line, 0 })
    -- A line that was out of sight comes to the middle, not the edge.
    if line < shown[1] or line > shown[2] then
      api.nvim_win_call(win, function() vim.cmd('normal! zz') end)
    end
  end
  return win
end

-- goto_frame moves the editor to the selected frame now.
function M.goto_frame()
  local f = state and state.frame
  M.cancel('frame')
  if not f or not f.fullname or not f.line then return false end
  if not uv.fs_stat(f.fullname) then return false end
  local win = M.show(f.fullname, f.line)
  if win then refresh(api.nvim_win_get_buf(win)) end
  return win ~= nil
end

-- follow moves to the frame at once when the student is idle in Normal
-- mode (a stop they caused from the gdb pane or with a key), else when
-- they have been idle for a while.
function M.follow()
  if M.idle() then
    M.goto_frame()
  else
    M.when_idle('frame', M.goto_frame)
  end
end

return M
