package nvim

import (
	"context"
	"fmt"
	"regexp"

	gonvim "github.com/neovim/go-client/nvim"
)

// At most 64 bytes, checked apart (a bounded repetition compiles to that
// many copies of the class, paid at every start-up).
var flagNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// BufferFlag reports whether the buffer variable b:<name> is set to a true
// value (1, v:true, or a non-empty string other than "0"). The student uses
// such flags to open a buffer to assist-level edits (b:stem_allow_edit).
func (c *Client) BufferFlag(ctx context.Context, buf int, name string) (bool, error) {
	if buf < 1 {
		return false, fmt.Errorf("nvim buffer flag: buffer number %d: must be 1 or more", buf)
	}
	if len(name) > 64 || !flagNameRE.MatchString(name) {
		return false, fmt.Errorf("nvim buffer flag: bad variable name %q", name)
	}
	var v any
	err := c.call(ctx, "buffer flag", guardHang, true, func(n *gonvim.Nvim) error {
		return execLua(n, fnFlag, &v, buf, name)
	})
	if err != nil {
		return false, err
	}
	b, _ := v.(bool)
	return b, nil
}
