package nvim

import (
	"context"
	"fmt"
	"strings"

	gonvim "github.com/neovim/go-client/nvim"
)

// The host applies a proposal the student accepted on the host: one call
// that finds the file's buffer, checks each hunk's lines are still those
// it was made on and makes the change. Where to look is the host's copy
// (the line it was proposed at) and, as a hint, the plugin's anchor (it
// follows the student's edits above the hunk); either is used only where
// the buffer holds exactly the old lines. Lines are replaced in place
// with setbufline, which keeps a replaced line's signs (breakpoints);
// nvim_buf_set_lines would drop them.

// HunkEdit is one hunk to apply: Old at 0-based Row becomes New; with no
// Old, New goes below the line Ctx at Row (above it with Before).
type HunkEdit struct {
	Row    int      `msgpack:"row"`
	Old    []string `msgpack:"old"`
	New    []string `msgpack:"new"`
	Ctx    string   `msgpack:"ctx"`
	Before bool     `msgpack:"before"`
	// Settle is the state the editor shows for this hunk afterwards.
	Settle string `msgpack:"settle"`
	// Apply: make this hunk's change (false: only settle it).
	Apply bool `msgpack:"apply"`
}

// Applied is what ApplyHunks did.
type Applied struct {
	// Loaded: the file was in a loaded buffer (otherwise nothing was done).
	Loaded bool
	Buffer int
	// Before is the whole buffer before the change (nil: over the byte
	// budget), exactly as held, for provenance only.
	Before []string
	// Rows are, per hunk, the 0-based row it was found and applied at in
	// Before, or -1 (its lines changed: stale, nothing done).
	Rows []int
}

const luaApplyHunks = `
local path, id, key, edits, maxb = ...
local api = vim.api
local buf
for _, b in ipairs(api.nvim_list_bufs()) do
  if api.nvim_buf_is_loaded(b) and api.nvim_buf_get_name(b) == path then buf = b; break end
end
if not buf then return {loaded = false} end
if api.nvim_buf_get_option(buf, 'buftype') ~= '' then return {err = 'buftype'} end
if not api.nvim_buf_get_option(buf, 'modifiable') then return {err = 'nomodifiable'} end
local hint = {}
local okp, m = pcall(require, 'stem.proposals')
if okp and type(m) == 'table' and type(m.rows) == 'function' then
  local ok, r = pcall(m.rows, id, key, buf)
  if ok and type(r) == 'table' then hint = r end
end
local lines = api.nvim_buf_get_lines(buf, 0, -1, true)
local n, size = #lines, 0
for _, l in ipairs(lines) do size = size + #l + 1 end
local function matches(row, want)
  if type(row) ~= 'number' or row < 0 or row + #want > n then return false end
  for i = 1, #want do
    if lines[row + i] ~= want[i] then return false end
  end
  return true
end
-- replace puts new in place of the old lines at row r: a line replaced
-- in place with setbufline keeps its signs (nvim_buf_set_lines and
-- nvim_buf_set_text drop them), the rest is appended or deleted.
local function replace(r, nold, new)
  for _, l in ipairs(new) do
    -- a NUL cannot pass through a Vim function: the API keeps it
    if l:find('%z') then api.nvim_buf_set_lines(buf, r, r + nold, true, new); return end
  end
  local common = math.min(nold, #new)
  if common > 0 then vim.fn.setbufline(buf, r + 1, vim.list_slice(new, 1, common)) end
  if #new > common then vim.fn.appendbufline(buf, r + common, vim.list_slice(new, common + 1)) end
  if nold > common then vim.fn.deletebufline(buf, r + common + 1, r + nold) end
end
local rows, order = {}, {}
for i, e in ipairs(edits) do
  rows[i] = -1
  if e.apply then
    local want = #e.old > 0 and e.old or {e.ctx}
    for _, r in ipairs({hint[i], e.row}) do
      if matches(r, want) then rows[i] = r; break end
    end
    if rows[i] >= 0 then order[#order + 1] = i end
  end
end
-- bottom-up, so each hunk's row is still where the others left it; a
-- hunk that would overlap the one below it is stale
table.sort(order, function(x, y) return rows[x] > rows[y] end)
local floor = n + 1
for _, i in ipairs(order) do
  local e, r = edits[i], rows[i]
  local last = r + math.max(#e.old, 1)
  if last > floor then
    rows[i] = -1
  else
    floor = r
    if #e.old > 0 then
      replace(r, #e.old, e.new)
    elseif #e.new > 0 then
      local at = e.before and r or r + 1
      api.nvim_buf_set_lines(buf, at, at, true, e.new)
    end
  end
end
if okp and type(m) == 'table' and type(m.settle) == 'function' then
  local states = {}
  for i, e in ipairs(edits) do
    states[i] = e.settle
    if e.apply and rows[i] < 0 then states[i] = 'stale' end
  end
  pcall(m.settle, id, key, states)
end
return {loaded = true, buf = buf, rows = rows, before = size <= maxb and lines or nil}`

var fnApplyHunks = newLuaFunc(luaApplyHunks)

// ApplyHunks applies edits to the loaded buffer of absPath and tells the
// plugin (proposal id, key) each hunk's outcome. A file not loaded gives
// Applied{Loaded: false} and no change.
func (c *Client) ApplyHunks(ctx context.Context, absPath, id, key string, edits []HunkEdit, maxBytes int) (*Applied, error) {
	for i := range edits {
		if edits[i].Old == nil {
			edits[i].Old = []string{}
		}
		if edits[i].New == nil {
			edits[i].New = []string{}
		}
	}
	var res struct {
		Err    string   `msgpack:"err"`
		Loaded bool     `msgpack:"loaded"`
		Buf    int      `msgpack:"buf"`
		Rows   []int    `msgpack:"rows"`
		Before []string `msgpack:"before"`
	}
	err := c.call(ctx, "apply proposal", guardHang, false, func(v *gonvim.Nvim) error {
		return execLua(v, fnApplyHunks, &res, absPath, id, key, edits, maxBytes)
	})
	if err != nil {
		return nil, err
	}
	switch res.Err {
	case "":
	case "buftype":
		return nil, fmt.Errorf("nvim apply proposal: %s: %w", absPath, ErrBufType)
	case "nomodifiable":
		return nil, fmt.Errorf("nvim apply proposal: the buffer of %s is not modifiable ('nomodifiable'): make it modifiable and accept again", absPath)
	default:
		return nil, fmt.Errorf("nvim apply proposal: %s", clipText(res.Err))
	}
	if !res.Loaded {
		return &Applied{}, nil
	}
	if len(res.Rows) != len(edits) {
		return nil, fmt.Errorf("nvim apply proposal: the editor answered for %d hunks of %d", len(res.Rows), len(edits))
	}
	out := &Applied{Loaded: true, Buffer: res.Buf, Rows: res.Rows, Before: res.Before}
	for i, r := range res.Rows {
		if r < -1 || (r >= 0 && !edits[i].Apply) {
			return nil, fmt.Errorf("nvim apply proposal: the editor answered row %d for hunk %d", r, i+1)
		}
		// What the editor says it matched must match the snapshot it sent.
		if r >= 0 && res.Before != nil {
			want := edits[i].Old
			if len(want) == 0 {
				want = []string{edits[i].Ctx}
			}
			if r+len(want) > len(res.Before) || strings.Join(res.Before[r:r+len(want)], "\n") != strings.Join(want, "\n") {
				return nil, fmt.Errorf("nvim apply proposal: the editor's answer for hunk %d does not match its buffer", i+1)
			}
		}
	}
	return out, nil
}

const luaSettle = `
local ok, m = pcall(require, 'stem.proposals')
if not ok or type(m) ~= 'table' or type(m.settle) ~= 'function' then return {err = 'noplugin'} end
local ok2, r = pcall(m.settle, ...)
if not ok2 or type(r) ~= 'table' then return {err = 'failed'} end
return r`

var fnSettle = newLuaFunc(luaSettle)

// Settle tells the editor's plugin the host's decision on each hunk of
// proposal id (key), so it stops showing them. The editor's answer says
// nothing that matters: the decision is on record on the host already.
func (c *Client) Settle(ctx context.Context, id, key string, states []string) error {
	return c.proposalCall(ctx, "settle proposal", "settle", id, fnSettle, id, key, states)
}
