package nvim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	gonvim "github.com/neovim/go-client/nvim"
)

// Fixed Lua chunks run with nvim_exec_lua. Every piece of outside data (paths,
// buffer text, hint text, numbers) arrives as an argument in `...`, never as
// source text. Each chunk does its checks and its work in one request, so
// the student cannot change the state between a check and the action.
//
// Failures the caller must tell apart are returned as {err = "..."} rather
// than raised, so they map onto sentinel errors.
//
// Each chunk runs through a luaFunc, so Neovim compiles it once per run.

// luaFindBuf is shared by chunks that accept a buffer number or a path. It
// defines find(bufnr, path) -> bufnr | nil, errcode.
const luaFindBuf = `
local api = vim.api
local function find(bufnr, path)
  if path ~= '' then
    for _, b in ipairs(api.nvim_list_bufs()) do
      if api.nvim_buf_get_name(b) == path then bufnr = b; break end
    end
    if bufnr == 0 then
      -- The same file reached through a symlink.
      local want = vim.loop.fs_realpath(path)
      if want then
        for _, b in ipairs(api.nvim_list_bufs()) do
          local n = api.nvim_buf_get_name(b)
          if n ~= '' and vim.loop.fs_realpath(n) == want then bufnr = b; break end
        end
      end
    end
    if bufnr == 0 then return nil, 'notloaded' end
  elseif not api.nvim_buf_is_valid(bufnr) then
    return nil, 'nobuffer'
  end
  if not api.nvim_buf_is_loaded(bufnr) then return nil, 'notloaded' end
  return bufnr
end
`

// luaRead(bufnr, path, first, last, maxbytes): lines first..last (1-based,
// inclusive; last < 1 means the end) until maxbytes (each line counts its
// length plus one for the newline). A first line longer than the budget is
// cut rather than dropped, so the caller always sees something.
const luaRead = luaFindBuf + `
local bufnr, path, first, last, maxbytes = ...
local b, e = find(bufnr, path)
if not b then return {err = e} end
local total = api.nvim_buf_line_count(b)
if first < 1 then first = 1 end
if last < 1 or last > total then last = total end
-- A chunk of lines that fits the budget is joined whole; only the chunk
-- where the budget ends is walked line by line. A per-line Lua loop over
-- a 1,000-line read cost as much as fetching the lines.
local parts, count, used, truncated, cut = {}, 0, 0, false, false
local i = first
while i <= last do
  local stop = math.min(last, i + 1023)
  local lines = api.nvim_buf_get_lines(b, i - 1, stop, true)
  local s = table.concat(lines, '\n')
  if used + #s + 1 > maxbytes then
    truncated = true
    local n = 0
    for k = 1, #lines do
      local size = #lines[k] + 1
      if used + size > maxbytes then break end
      used, n = used + size, k
    end
    if n > 0 then
      parts[#parts + 1] = table.concat(lines, '\n', 1, n)
      count = count + n
    elseif count == 0 then
      parts[1] = string.sub(lines[1], 1, maxbytes)
      count, cut = 1, true
    end
    break
  end
  parts[#parts + 1] = s
  used, count = used + #s + 1, count + #lines
  i = stop + 1
end
-- One string instead of a list: converting a thousand Lua strings to
-- msgpack and back costs more than the read. Lines never contain "\n"
-- (the API returns an embedded newline as NUL), so the join is lossless.
return {
  buf = b, name = api.nvim_buf_get_name(b), total = total, first = first,
  truncated = truncated, cut = cut, count = count,
  text = #parts == 1 and parts[1] or table.concat(parts, '\n'),
  modified = api.nvim_buf_get_option(b, 'modified'),
  tick = api.nvim_buf_get_changedtick(b),
}
`

// luaStatus(maxbufs): cursor, current buffer and the buffer list.
const luaStatus = `
local maxbufs = ...
local api = vim.api
local cur = api.nvim_get_current_buf()
local cursor = api.nvim_win_get_cursor(0)
local all = api.nvim_list_bufs()
local bufs = {}
for _, b in ipairs(all) do
  if #bufs >= maxbufs then break end
  local loaded = api.nvim_buf_is_loaded(b)
  bufs[#bufs + 1] = {
    number = b,
    name = api.nvim_buf_get_name(b),
    loaded = loaded,
    listed = api.nvim_buf_get_option(b, 'buflisted'),
    modified = api.nvim_buf_get_option(b, 'modified'),
    lines = loaded and api.nvim_buf_line_count(b) or 0,
    filetype = api.nvim_buf_get_option(b, 'filetype'),
    buftype = api.nvim_buf_get_option(b, 'buftype'),
  }
end
return {
  buf = cur, win = api.nvim_get_current_win(),
  line = cursor[1], col = cursor[2],
  cwd = vim.loop.cwd() or '',
  buffers = bufs, nbufs = #all,
}
`

// luaDiagnostics(bufnr, max): vim.diagnostic.get for one buffer (bufnr > 0)
// or all (bufnr == 0). Fields are copied one by one so a plugin's odd
// values (tables in user_data, functions) never reach msgpack.
const luaDiagnostics = `
local bufnr, max = ...
local api = vim.api
if bufnr ~= 0 and not api.nvim_buf_is_valid(bufnr) then return {err = 'nobuffer'} end
local list = vim.diagnostic.get(bufnr ~= 0 and bufnr or nil)
local out, names = {}, {}
for i, d in ipairs(list) do
  if i > max then break end
  local b = d.bufnr or 0
  if names[b] == nil then
    names[b] = (b ~= 0 and api.nvim_buf_is_valid(b)) and api.nvim_buf_get_name(b) or ''
  end
  out[i] = {
    buf = b, name = names[b],
    lnum = tonumber(d.lnum) or 0, col = tonumber(d.col) or 0,
    end_lnum = tonumber(d.end_lnum) or tonumber(d.lnum) or 0,
    end_col = tonumber(d.end_col) or tonumber(d.col) or 0,
    severity = tonumber(d.severity) or 0,
    message = tostring(d.message or ''),
    source = d.source ~= nil and tostring(d.source) or nil,
    code = d.code ~= nil and tostring(d.code) or nil,
  }
end
local res = {total = #list}
if #out > 0 then res.items = out end
return res
`

// luaOpen(path): open a file in the current window without any Ex string.
// bufadd() takes the name literally (no wildcards, backticks, %, #, <cword>
// or $VAR). While the file is read, 'modelines' is 0 and the buffer's
// 'modeline' is switched off, so a hostile modeline cannot act even if the
// student's own config turned modelines back on. A swap file left by another
// editor would make Neovim show ATTENTION and wait for a key; the file is
// opened read-only instead and the caller is told.
//
// The file is read with the read autocommands ignored ('eventignore', put
// back afterwards whatever happens). Those are what Neovim's gzip, tar and
// zip plugins hook by file name (*.gz, *.tar, *.zip, ...) to run gzip,
// tar or unzip on the file, and what netrw hooks for URL-like names; a
// student's config can turn them back on, or hook reads itself. The file
// then gets its filetype as with :edit, by running only the filetypedetect
// group for it (no modelines), once it is in the student's window (so
// window-local options of filetype plugins land there).
const luaOpen = luaReadEvents + `
local path = ...
local api, fn = vim.api, vim.fn
if fn.isdirectory(path) == 1 then return {err = 'directory'} end
local existed = vim.loop.fs_stat(path) ~= nil
-- No window changes: the buffer is loaded and listed beside the student's,
-- who keeps what they see and type in (and so no unsaved buffer of theirs
-- is ever left, hidden or saved by 'autowrite').
local buf = fn.bufadd(path)
if buf == 0 then return {err = 'bufadd'} end
local swap, loaded = false, false
local saved, savedei = vim.go.modelines, vim.go.eventignore
vim.go.modelines = 0
local ok, msg = pcall(function()
  if not api.nvim_buf_is_loaded(buf) then
    api.nvim_buf_set_option(buf, 'modeline', false)
    -- bufload() skips the swap dialog but still shows the ATTENTION text
    -- (a Press ENTER prompt for the student, and typeahead flushed);
    -- shortmess "A" skips it. Another editor's swap file then shows as our
    -- own swap file not getting the first name (.swp).
    local shm = vim.go.shortmess
    vim.go.shortmess = shm .. 'A'
    vim.go.eventignore = savedei == '' and readEvents or savedei .. ',' .. readEvents
    local lok, lerr = pcall(fn.bufload, buf)
    vim.go.eventignore = savedei
    vim.go.shortmess = shm
    if not lok then error(lerr, 0) end
    loaded = true
    local sw = fn.swapname(buf)
    if sw ~= '' and not sw:match('%.swp$') then
      swap = true
      api.nvim_buf_set_option(buf, 'readonly', true)
    end
  end
  api.nvim_buf_set_option(buf, 'modeline', false)
  api.nvim_buf_set_option(buf, 'buflisted', true)
  if loaded then
    -- The filetype, as :edit would set it: the filetypedetect group only
    -- (no group means the student turned detection off). It sets
    -- 'filetype', whose FileType event loads syntax and filetype plugins.
    -- A failing hook of the student's does not undo the open.
    pcall(api.nvim_buf_call, buf, function()
      api.nvim_exec_autocmds(existed and 'BufRead' or 'BufNewFile',
        {group = 'filetypedetect', buffer = buf, modeline = false})
    end)
  end
end)
vim.go.eventignore = savedei
vim.go.modelines = saved
if not ok then return {err = 'open', msg = tostring(msg), buf = buf} end
return {
  buf = buf, name = api.nvim_buf_get_name(buf),
  lines = api.nvim_buf_line_count(buf), new = not existed,
  swap = swap, readonly = api.nvim_buf_get_option(buf, 'readonly'),
}
`

// luaReadEvents defines readEvents: the events ignored while stem loads a
// buffer. The read events themselves (BufRead is BufReadPost, FileRead
// likewise), the *Cmd events that replace reading or sourcing with a
// plugin's code, and what a read can set off: FileType and Syntax (from
// the detection, which stem runs itself afterwards), SpellFileMissing (a
// download), SwapExists (bufload answers that itself).
const luaReadEvents = `
local readEvents = 'BufNewFile,BufReadPre,BufReadPost,BufReadCmd,FileReadPre,FileReadPost,FileReadCmd,' ..
  'FilterReadPre,FilterReadPost,SourcePre,SourcePost,SourceCmd,FileType,Syntax,SpellFileMissing,SwapExists'
`

// luaSetLines(bufnr, first, last, lines, tick): replace lines first..last
// (1-based, inclusive; last == first-1 inserts before first), only if the
// buffer's changedtick is still tick when one is given (nil: any).
const luaSetLines = `
local buf, first, last, lines, tick = ...
local api = vim.api
if not api.nvim_buf_is_valid(buf) then return {err = 'nobuffer'} end
if not api.nvim_buf_is_loaded(buf) then return {err = 'notloaded'} end
if tick ~= nil and api.nvim_buf_get_changedtick(buf) ~= tick then
  return {err = 'tick', tick = api.nvim_buf_get_changedtick(buf)}
end
local bt = api.nvim_buf_get_option(buf, 'buftype')
if bt ~= '' then return {err = 'buftype', buftype = bt} end
if not api.nvim_buf_get_option(buf, 'modifiable') then return {err = 'nomodifiable'} end
local n = api.nvim_buf_line_count(buf)
if first < 1 or first > n + 1 or last < first - 1 or last > n then
  return {err = 'range', total = n}
end
api.nvim_buf_set_lines(buf, first - 1, last, true, lines)
return {total = api.nvim_buf_line_count(buf), tick = api.nvim_buf_get_changedtick(buf)}
`

// luaHint(bufnr, line, text, hl, label): a labelled note at a line, in
// the stem-hint namespace: at the end of the line when it fits the
// narrowest window showing the buffer, else as virtual lines below it,
// wrapped to that width (Neovim cuts virtual text at the window's edge,
// never wraps it). Two cells are kept for a sign column that may appear.
// Extmarks do not change the buffer's text, 'modified' or changedtick.
const luaHint = `
local buf, line, text, hl, label = ...
local api, fn = vim.api, vim.fn
if not api.nvim_buf_is_valid(buf) then return {err = 'nobuffer'} end
if not api.nvim_buf_is_loaded(buf) then return {err = 'notloaded'} end
local n = api.nvim_buf_line_count(buf)
if line < 1 or line > n then return {err = 'range', total = n} end
local w
for _, win in ipairs(api.nvim_list_wins()) do
  if api.nvim_win_get_buf(win) == buf then
    local i = fn.getwininfo(win)[1]
    local ww = i and (i.width - (i.textoff or 0) - 2)
    if ww and (not w or ww < w) then w = ww end
  end
end
w = math.max(w or (vim.o.columns - 4), 20)
local dw = fn.strdisplaywidth
local full = label .. text
local here = dw(api.nvim_buf_get_lines(buf, line - 1, line, true)[1])
local ns = api.nvim_create_namespace('stem-hint')
if here + 1 + dw(full) <= w then
  return {id = api.nvim_buf_set_extmark(buf, ns, line - 1, 0, {
    virt_text = {{full, hl}}, virt_text_pos = 'eol', hl_mode = 'combine',
  })}
end
local MAX = 6
local rows, cur = {}, ''
local function cut(s, width)
  local out = ''
  for k = 0, fn.strchars(s) - 1 do
    local c = fn.strcharpart(s, k, 1)
    if dw(out .. c) > width then break end
    out = out .. c
  end
  return out
end
for word in full:gmatch('%S+') do
  local try = cur == '' and word or (cur .. ' ' .. word)
  if dw(try) <= w then
    cur = try
  else
    if cur ~= '' then rows[#rows + 1] = cur end
    cur = word
    while dw(cur) > w and #rows <= MAX do
      local head = cut(cur, w)
      rows[#rows + 1] = head
      cur = cur:sub(#head + 1)
    end
  end
  if #rows > MAX then break end
end
if cur ~= '' then rows[#rows + 1] = cur end
if #rows > MAX then
  for k = #rows, MAX + 1, -1 do rows[k] = nil end
  rows[MAX] = cut(rows[MAX], w - 1) .. '…'
end
local virt = {}
for k, r in ipairs(rows) do virt[k] = {{r, hl}} end
return {id = api.nvim_buf_set_extmark(buf, ns, line - 1, 0, {virt_lines = virt})}
`

// luaClearHints(bufnr): drop our hints in one buffer, or everywhere (0).
const luaClearHints = `
local buf = ...
local api = vim.api
if buf ~= 0 and not api.nvim_buf_is_valid(buf) then return {err = 'nobuffer'} end
local ns = api.nvim_create_namespace('stem-hint')
local bufs = buf == 0 and api.nvim_list_bufs() or {buf}
local count = 0
for _, b in ipairs(bufs) do
  if api.nvim_buf_is_loaded(b) then
    count = count + #api.nvim_buf_get_extmarks(b, ns, 0, -1, {})
    api.nvim_buf_clear_namespace(b, ns, 0, -1)
  end
end
return {count = count}
`

// The chunks as functions.
var (
	fnRead        = newLuaFunc(luaRead)
	fnStatus      = newLuaFunc(luaStatus)
	fnDiagnostics = newLuaFunc(luaDiagnostics)
	fnOpen        = newLuaFunc(luaOpen)
	fnSetLines    = newLuaFunc(luaSetLines)
	fnHint        = newLuaFunc(luaHint)
	fnClearHints  = newLuaFunc(luaClearHints)
)

// luaFunc is a fixed chunk kept in Neovim as a function, in
// package.loaded._stem_rpc under a key derived from its source (so two
// stem versions never share one). A call sends a one-line chunk that calls
// it; only when the function is missing (a new Neovim, or the table was
// cleared) is the whole chunk sent to define it. Compiling the read chunk
// cost about 25 µs a call, and a chunk compiled afresh each time never kept
// LuaJIT's traces. The student's Neovim could replace the function, but it
// could as well replace vim.api: the editor is theirs either way.
type luaFunc struct{ call, define string }

// luaUndefined is the error a call raises when its function is missing.
const luaUndefined = "stem_rpc: function not defined"

func newLuaFunc(body string) luaFunc {
	sum := sha256.Sum256([]byte(body))
	key := "f" + hex.EncodeToString(sum[:8])
	return luaFunc{
		call: "local m = package.loaded._stem_rpc; local f = type(m) == 'table' and rawget(m, '" + key + "')\n" +
			"if type(f) ~= 'function' then error('" + luaUndefined + "', 0) end\nreturn f(...)",
		define: "if type(package.loaded._stem_rpc) ~= 'table' then package.loaded._stem_rpc = {} end\n" +
			"rawset(package.loaded._stem_rpc, '" + key + "', function(...)\n" + body + "\nend)",
	}
}

// execLua runs f with args, defining it first when Neovim lacks it.
func execLua(v *gonvim.Nvim, f luaFunc, result any, args ...any) error {
	err := v.ExecLua(f.call, result, args...)
	if err == nil || !strings.Contains(err.Error(), luaUndefined) {
		return err
	}
	if err := v.ExecLua(f.define, nil); err != nil {
		return fmt.Errorf("define a Lua function in Neovim: %w", err)
	}
	return v.ExecLua(f.call, result, args...)
}
