package mcpserver

import (
	"context"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// InProcess serves the session to an MCP client in this process, over
// mcp-go's in-process transport: the same server, hooks, tool filter,
// audit and verification as over stdio, without a pipe or a process (what
// in-process tests drive, package mcptest). The client comes back
// initialized. end closes it and ends the session as the end of stdin
// does (session_end audited); it returns what ServeStdio would.
func (s *Server) InProcess(ctx context.Context, info mcp.Implementation) (cl *client.Client, end func() error, err error) {
	ctx, stop, start := s.open(ctx)
	cl, err = client.NewInProcessClient(s.mcp)
	if err == nil {
		err = cl.Start(ctx)
	}
	if err == nil {
		var req mcp.InitializeRequest
		req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		req.Params.ClientInfo = info
		_, err = cl.Initialize(ctx, req)
	}
	var once sync.Once
	var endErr error
	end = func() error {
		once.Do(func() {
			if cl != nil {
				cl.Close()
			}
			endErr = s.finish(ctx, start, nil)
			stop(nil)
		})
		return endErr
	}
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("in-process client: %w", err)
	}
	return cl, end, nil
}
