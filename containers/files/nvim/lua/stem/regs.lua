-- stem.regs: a small window with the general registers (on RV32 x0-x31 by
-- their ABI names, and pc) and a few words of memory (at $sp, or what
-- :StemMemory names), marking with '*' and a highlight what changed since
-- the previous stop. It reads `info registers general`, the same text
-- gdb_status gives agents, and -data-read-memory-bytes after every stop
-- while it is open.
local api = vim.api
local mi = require('stem.mi')
local M = {}

local MEM_WORDS = 8
local mem_expr = '$sp'

local NAME = 'stem://registers'
local ns = api.nvim_create_namespace('stem_regs')
-- prev holds the values read at stop number prev_stop; only a read at the
-- very next stop marks changes. buf is the view's buffer.
local prev, prev_stop, buf

local function window()
  if not buf or not api.nvim_buf_is_valid(buf) then return nil end
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(w) == buf then return w end
  end
  return nil
end

local function render(lines, changed)
  for i, l in ipairs(lines) do
    -- gdb's messages span lines ("...while the target is running.\nUse...").
    lines[i] = l:gsub('%c', ' ')
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for i in pairs(changed) do
    api.nvim_buf_add_highlight(buf, ns, 'StemRegChanged', i - 1, 0, -1)
  end
end

-- parse reads `info registers` lines: name, raw value, natural rendering.
local function parse(text)
  local regs = {}
  for l in text:gmatch('[^\n]+') do
    local name, raw, nat = l:match('^(%S+)%s+(%S+)%s*(.-)%s*$')
    if name then regs[#regs + 1] = { name = name, raw = raw, natural = nat } end
  end
  return regs
end

function M.refresh(dbg)
  if not window() then return end
  local S = dbg.state
  if S.running ~= false then
    local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
    lines[1] = S.state == 'running' and ' registers: running' or ' registers: no program stopped'
    render(lines, {})
    return
  end
  local stop = S.stops
  dbg.send('-interpreter-exec console "info registers general"', function(rec, console)
    if not buf or not api.nvim_buf_is_valid(buf) then return end
    if rec.class ~= 'done' then
      render({ ' registers: ' .. (rec.results.msg or 'unavailable') }, {})
      return
    end
    local regs, lines, changed, now = parse(console), { ' registers (* changed)' }, {}, {}
    local base = prev_stop == stop - 1 and prev or nil
    local width = 4
    for _, r in ipairs(regs) do width = math.max(width, #r.name) end
    for _, r in ipairs(regs) do
      now[r.name] = r.raw
      local ch = base and base[r.name] and base[r.name] ~= r.raw
      -- gdb's rendering only where it says more than the value (<main+20>).
      local nat = r.natural
      if nat:sub(1, #r.raw) == r.raw then nat = vim.trim(nat:sub(#r.raw + 1)) end
      nat = (nat ~= '' and not nat:match('^%-?%d+$')) and (' ' .. nat) or ''
      lines[#lines + 1] = string.format('%s%-' .. width .. 's %s%s', ch and '*' or ' ', r.name, r.raw, nat)
      if ch then changed[#lines] = true end
    end
    if mem_expr == '' then
      prev, prev_stop = now, stop
      render(lines, changed)
      return
    end
    -- Words of memory, little-endian (RV32, Cortex-M and x86-64 all are).
    dbg.send('-data-read-memory-bytes ' .. mi.quote(mem_expr) .. ' ' .. MEM_WORDS * 4, function(m)
      if not buf or not api.nvim_buf_is_valid(buf) then return end
      local blk = m.class == 'done' and type(m.results.memory) == 'table' and m.results.memory[1]
      if not blk or type(blk.contents) ~= 'string' then
        lines[#lines + 1] = ''
        lines[#lines + 1] = ' ' .. mem_expr .. ': ' .. (m.results.msg or 'unreadable')
      else
        lines[#lines + 1] = ''
        lines[#lines + 1] = ' ' .. mem_expr .. ' = ' .. (blk.begin or '?')
        for i = 0, math.floor(#blk.contents / 8) - 1 do
          local b = blk.contents:sub(i * 8 + 1, i * 8 + 8)
          local word = '0x' .. b:sub(7, 8) .. b:sub(5, 6) .. b:sub(3, 4) .. b:sub(1, 2)
          local key = (blk.begin or '') .. '+' .. i * 4
          now[key] = word
          local ch = base and base[key] and base[key] ~= word
          lines[#lines + 1] = string.format('%s+%-3d %s', ch and '*' or ' ', i * 4, word)
          if ch then changed[#lines] = true end
        end
      end
      prev, prev_stop = now, stop
      render(lines, changed)
    end)
  end)
end

-- memory sets what the view shows memory at (a gdb expression; '' for
-- none) and opens the view.
function M.memory(dbg, expr)
  mem_expr = expr
  if window() then
    M.refresh(dbg)
  else
    M.toggle(dbg)
  end
end

-- toggle opens the view at the right of the editor (focus stays where it
-- was) or closes it.
function M.toggle(dbg)
  local w = window()
  if w then
    api.nvim_win_close(w, true)
    return
  end
  if not buf or not api.nvim_buf_is_valid(buf) then
    buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, NAME)
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].filetype = 'stem-registers'
    render({ ' registers' }, {})
  end
  local cur = api.nvim_get_current_win()
  vim.cmd('botright vertical 30split')
  w = api.nvim_get_current_win()
  api.nvim_win_set_buf(w, buf)
  for opt, v in pairs({ number = false, relativenumber = false, signcolumn = 'no', wrap = false, winfixwidth = true,
    cursorline = false, statusline = ' registers and memory' }) do
    vim.wo[w][opt] = v
  end
  api.nvim_set_current_win(cur)
  dbg.set_registers_hook(function() M.refresh(dbg) end)
  M.refresh(dbg)
end

M.parse = parse
return M
