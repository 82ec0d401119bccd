package mcpcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/egress"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// newCmdAgentNet is the agent sandbox's main process: the sandbox has no
// network, and this serves the host's egress proxy (a Unix socket mounted
// in) on the loopback port its HTTPS_PROXY names.
func newCmdAgentNet() *cobra.Command {
	var listen, sock string
	cmd := &cobra.Command{
		Use:    "agent-net --listen 127.0.0.1:PORT --sock PATH",
		Short:  "Carry the agent sandbox's proxy port to the host's egress proxy (in the sandbox)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" || sock == "" {
				return cmdutil.FlagErrorf("--listen and --sock are required")
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("agent-net: %w", err)
			}
			return egress.Forward(cmd.Context(), ln, sock)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "loopback address to serve")
	cmd.Flags().StringVar(&sock, "sock", "", "the host's egress proxy socket")
	return cmd
}

// newCmdAgentMCP is the stem MCP server as the agent CLI in the sandbox
// starts it: its standard input and output carried to the MCP socket,
// where the host runs stem-mcp at the agent's level.
func newCmdAgentMCP(ios *iostreams.IOStreams) *cobra.Command {
	var sock string
	cmd := &cobra.Command{
		Use:    "agent-mcp --sock PATH",
		Short:  "Connect stdio to the host's stem MCP server for this agent (in the sandbox)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sock == "" {
				return cmdutil.FlagErrorf("--sock is required")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
			cancel()
			if err != nil {
				return fmt.Errorf("agent-mcp: connect to stem: %w", err)
			}
			defer c.Close()
			uc := c.(*net.UnixConn)
			go func() {
				io.Copy(uc, ios.In)
				// The client's end of input only half-closes the session:
				// the last answers still come back.
				uc.CloseWrite()
			}()
			// The session ends when the server closes it.
			if _, err := io.Copy(ios.Out, uc); err != nil && !errors.Is(err, net.ErrClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "sock", "", "the MCP socket the host serves")
	return cmd
}
