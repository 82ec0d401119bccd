package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/xdg"
)

func BenchmarkInProcess(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	var lines []string
	for i := 0; i < 1000; i++ {
		lines = append(lines, fmt.Sprintf("    x[%d] = compute(%d) + offset; /* line %d of the benchmark file */", i, i, i))
	}
	os.WriteFile(filepath.Join(in.Resolved.TaskDir, "bench.c"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	d := in.Dirs
	s, err := New(Options{Level: Assist, Dirs: &xdg.Dirs{Runtime: d.Runtime, State: d.State, Config: d.Config, Home: d.Home}, Getenv: func(k string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	s.begin()
	<-s.started
	defs := map[string]toolDef{}
	for _, t := range allTools() {
		if t.at(Assist) {
			defs[t.tool.Name] = t
		}
	}
	call := func(name string, args map[string]any) {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		res, err := s.call(context.Background(), []toolDef{defs[name]}, req)
		if err != nil || res.IsError {
			data, _ := json.Marshal(res)
			b.Fatalf("%s: %v %s", name, err, data)
		}
	}
	call("nvim_open", map[string]any{"path": "t1/bench.c"})
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	b.Run("read1000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			call("nvim_buffer_read", map[string]any{"path": "t1/bench.c", "start": float64(1), "end": float64(1000), "max_bytes": float64(262144)})
		}
	})
	b.Run("nvim-direct", func(b *testing.B) {
		c, err := s.target(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		cp, _ := resolveCardPath(c.target().Record.CardPath, "t1/bench.c", true)
		for i := 0; i < b.N; i++ {
			if _, err := c.nvim.ReadBuffer(context.Background(), nvim.File(cp.Abs), 1, 1000, 262144); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nvim-mode", func(b *testing.B) {
		c, _ := s.target(context.Background())
		for i := 0; i < b.N; i++ {
			c.nvim.(*nvim.Client).Mode(context.Background())
		}
	})
	b.Run("tmux-paneinfo", func(b *testing.B) {
		c, _ := s.target(context.Background())
		for i := 0; i < b.N; i++ {
			c.tmux.PaneInfo(context.Background(), tmux.PaneID(pane))
		}
	})
	b.Run("tmux-capture", func(b *testing.B) {
		c, _ := s.target(context.Background())
		for i := 0; i < b.N; i++ {
			c.tmux.Capture(context.Background(), tmux.PaneID(pane), tmux.CaptureOptions{Join: true})
		}
	})
	b.Run("capture", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			call("pane_capture", map[string]any{"pane": pane})
		}
	})
}

// BenchmarkStdioInProcess runs ServeStdio over pipes with raw JSON-RPC
// lines, so a CPU profile shows the transport's share of a pane capture.
func BenchmarkStdioInProcess(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	d := in.Dirs
	s, err := New(Options{Level: Observe, Dirs: &xdg.Dirs{Runtime: d.Runtime, State: d.State, Config: d.Config, Home: d.Home}, Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go s.ServeStdio(context.Background(), sr, sw)
	out := bufio.NewReader(cr)
	id := 0
	rt := func(fields string) {
		id++
		fmt.Fprintf(cw, `{"jsonrpc":"2.0","id":%d,%s}`+"\n", id, fields)
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.Contains(line, fmt.Sprintf(`"id":%d`, id)) {
				return
			}
		}
	}
	rt(`"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}`)
	fmt.Fprintln(cw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	pane := strings.TrimSpace(in.Tmux(b, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	req := `"method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"` + pane + `"}}`
	rt(req)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt(req)
	}
	b.StopTimer()
	cw.Close()
}
