package tmux

import "context"

// CommandForTest runs one raw tmux command line on the connection, for
// tests that check our quoting against tmux's own parser.
func (c *Client) CommandForTest(ctx context.Context, cmd string) (string, error) {
	return c.command(ctx, cmd)
}
