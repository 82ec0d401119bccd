package nvim

import (
	"context"
	"fmt"

	gonvim "github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/termtext"
)

// maxUnsaved bounds the names Unsaved returns; maxUnsavedName each name.
const (
	maxUnsaved     = 20
	maxUnsavedName = 200
)

// luaUnsaved(max): the names of at most max buffers with unsaved changes
// ("[buffer N]" for an unnamed one) and how many there are.
var fnUnsaved = newLuaFunc(`local max = ...
local names, n = {}, 0
for _, b in ipairs(vim.fn.getbufinfo({bufmodified = 1})) do
  n = n + 1
  if #names < max then
    names[#names + 1] = (b.name ~= '' and b.name) or ('[buffer ' .. b.bufnr .. ']')
  end
end
return {names = names, count = n}`)

// Unsaved lists the buffers with unsaved changes: each name as one
// sanitized line (a name is whatever the student's Neovim calls the
// buffer), at most maxUnsaved of them and then "... and N more".
// getbufinfo is not a fast function, so a Neovim waiting for input gives
// a *BlockedError: its buffers cannot be vouched for.
func (c *Client) Unsaved(ctx context.Context) ([]string, error) {
	var res struct {
		Names []string `msgpack:"names"`
		Count int      `msgpack:"count"`
	}
	err := c.call(ctx, "unsaved buffers", guardHang, true, func(v *gonvim.Nvim) error {
		return execLua(v, fnUnsaved, &res, maxUnsaved)
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, min(len(res.Names), maxUnsaved)+1)
	for _, n := range res.Names[:min(len(res.Names), maxUnsaved)] {
		out = append(out, termtext.Line(n, maxUnsavedName))
	}
	if more := res.Count - len(out); more > 0 {
		out = append(out, fmt.Sprintf("... and %d more", more))
	}
	return out, nil
}
