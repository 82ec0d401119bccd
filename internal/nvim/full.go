package nvim

import (
	"context"

	gonvim "github.com/neovim/go-client/nvim"
)

// Full-level operations. They are deliberately unrestricted (:!, system(),
// jobstart() all work): the MCP server registers them only for the full
// level, which equals interactive work on the student's account. They still
// refuse to run while the student is typing a command line or sitting at a
// prompt, because the request would either wait for a key or interleave with
// what the student is typing (and nvim_exec output is lost in that state).

// Command runs Ex/Vimscript src with nvim_exec and returns its output.
func (c *Client) Command(ctx context.Context, src string) (string, error) {
	var out string
	err := c.call(ctx, "command", guardInput, false, func(v *gonvim.Nvim) (err error) {
		out, err = v.Exec(src, true)
		return err
	})
	return out, err
}

// Lua runs a Lua chunk with nvim_exec_lua; args are available as `...`. The
// chunk's return value is decoded generically (maps, slices, int64,
// float64, string, bool, nil).
func (c *Client) Lua(ctx context.Context, code string, args []any) (any, error) {
	if args == nil {
		args = []any{}
	}
	var res any
	err := c.call(ctx, "lua", guardInput, false, func(v *gonvim.Nvim) error {
		return v.Request("nvim_exec_lua", &res, code, args)
	})
	return res, err
}
