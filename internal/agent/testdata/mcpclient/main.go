// Command mcpclient is the "custom" agent provider of stem's tests: a small
// MCP client that does what an agent CLI does with what `stemctl agent
// start` hands it. It reads the provider-neutral MCP configuration
// ($STEM_MCP_CONFIG) and starts the stem server from it with only the
// environment the configuration names (as Codex does), does the MCP
// handshake, calls tools, reads stem://context, tries a tool above its
// level, and writes a JSON report. Then it behaves like an interactive
// agent on its terminal: it answers "ping", "size" and "events", prints
// every session event it is sent, reports window-size changes and Ctrl-C
// ("interrupted"), and exits on "quit" (or "exit N"). With --soak-every it
// also calls tools at that pace for as long as it runs, writing its counts
// to --soak-report (soak.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/term"
)

// Report is what the test reads.
type Report struct {
	Env            map[string]string `json:"env"`
	Args           []string          `json:"args"`
	Cwd            string            `json:"cwd"`
	Rows           int               `json:"rows"`
	Cols           int               `json:"cols"`
	IsTTY          bool              `json:"is_tty"`
	ContextFile    string            `json:"context_file"`
	ContextText    string            `json:"context_text"`
	MCPCommand     []string          `json:"mcp_command"`
	Started        int64             `json:"started_unix_nano"`
	FirstCall      int64             `json:"first_call_unix_nano"`
	ServerName     string            `json:"server_name"`
	ServerVersion  string            `json:"server_version"`
	Tools          []string          `json:"tools"`
	SessionStatus  map[string]any    `json:"session_status"`
	ContextResrc   map[string]any    `json:"context_resource"`
	AboveLevel     string            `json:"above_level_tool"`
	AboveLevelErr  string            `json:"above_level_error"`
	Error          string            `json:"error,omitempty"`
	ReportFinished int64             `json:"report_unix_nano"`
}

func main() {
	started := time.Now()
	report := flag.String("report", "", "write the JSON report here")
	above := flag.String("above", "pane_run", "a tool that must not exist at the agent's level")
	soakEvery := flag.Duration("soak-every", 0, "call tools at this pace until the end (0: not at all)")
	soakReport := flag.String("soak-report", "", "write the soak's counts here")
	flag.Parse()
	rep := &Report{Started: started.UnixNano(), Args: os.Args[1:], Env: map[string]string{}}
	for _, k := range []string{"STEM_AGENT", "STEM_MCP", "STEM_INSTANCE", "STEM_AGENT_ID", "STEM_AGENT_LEVEL", "STEM_AGENT_CONTEXT", "STEM_MCP_CONFIG", "TERM"} {
		rep.Env[k] = os.Getenv(k)
	}
	rep.Cwd, _ = os.Getwd()
	if term.IsTerminal(0) {
		rep.IsTTY = true
		rep.Cols, rep.Rows, _ = term.GetSize(0)
	}
	c, err := run(rep, *above)
	if err != nil {
		rep.Error = err.Error()
	}
	rep.ReportFinished = time.Now().UnixNano()
	if *report != "" {
		writeReport(*report, rep)
	}
	var sk *soak
	if *soakEvery > 0 && c != nil {
		sk = startSoak(c, *soakEvery, *soakReport)
	}
	interactive(c, sk)
}

func writeReport(path string, rep *Report) {
	data, _ := json.MarshalIndent(rep, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		os.Rename(tmp, path)
	}
}

var (
	mu     sync.Mutex
	events []string
)

func run(rep *Report, above string) (*client.Client, error) {
	rep.ContextFile = os.Getenv("STEM_AGENT_CONTEXT")
	text, err := os.ReadFile(rep.ContextFile)
	if err != nil {
		return nil, fmt.Errorf("context file: %w", err)
	}
	rep.ContextText = string(text)
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	data, err := os.ReadFile(os.Getenv("STEM_MCP_CONFIG"))
	if err != nil {
		return nil, fmt.Errorf("MCP configuration: %w", err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("MCP configuration: %w", err)
	}
	for name := range cfg.MCPServers {
		rep.ServerName = name
	}
	srv, ok := cfg.MCPServers["stem"]
	if !ok {
		return nil, fmt.Errorf("no server named stem in %s", os.Getenv("STEM_MCP_CONFIG"))
	}
	rep.MCPCommand = append([]string{srv.Command}, srv.Args...)
	var env []string
	for k, v := range srv.Env {
		env = append(env, k+"="+v)
	}
	// Only the configured environment, as agent CLIs that filter it do.
	onlyEnv := transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = env
		return cmd, nil
	})
	c, err := client.NewStdioMCPClientWithOptions(srv.Command, env, srv.Args, onlyEnv)
	if err != nil {
		return nil, err
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationMessage) {
			return
		}
		data, _ := json.Marshal(n.Params.AdditionalFields)
		var m struct {
			Logger string `json:"logger"`
			Data   struct {
				Type     string `json:"type"`
				ExitCode *int   `json:"exit_code"`
				Signal   string `json:"signal"`
			} `json:"data"`
		}
		json.Unmarshal(data, &m)
		if m.Logger != "stem.events" {
			return
		}
		line := "event " + m.Data.Type
		if m.Data.ExitCode != nil {
			line += " exit=" + strconv.Itoa(*m.Data.ExitCode)
		}
		if m.Data.Signal != "" {
			line += " signal=" + m.Data.Signal
		}
		mu.Lock()
		events = append(events, line)
		mu.Unlock()
		fmt.Printf("\r\n%s\r\n", line)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// NewStdioMCPClient starts only the transport; Start installs the
	// notification dispatch.
	if err := c.Start(ctx); err != nil {
		return c, fmt.Errorf("start the MCP client: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "stem-test-agent", Version: "1"}
	ir, err := c.Initialize(ctx, init)
	if err != nil {
		return c, fmt.Errorf("initialize: %w", err)
	}
	rep.ServerVersion = ir.ServerInfo.Name + " " + ir.ServerInfo.Version
	st, err := call(ctx, c, "session_status", nil)
	if err != nil {
		return c, err
	}
	rep.FirstCall = time.Now().UnixNano()
	rep.SessionStatus = st
	tl, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return c, err
	}
	for _, t := range tl.Tools {
		rep.Tools = append(rep.Tools, t.Name)
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "stem://context"
	res, err := c.ReadResource(ctx, rr)
	if err != nil {
		return c, fmt.Errorf("read stem://context: %w", err)
	}
	for _, rc := range res.Contents {
		if t, ok := rc.(mcp.TextResourceContents); ok {
			json.Unmarshal([]byte(t.Text), &rep.ContextResrc)
		}
	}
	rep.AboveLevel = above
	if _, err := call(ctx, c, above, map[string]any{"pane": "%0", "command": "true"}); err != nil {
		rep.AboveLevelErr = err.Error()
	}
	return c, nil
}

func call(ctx context.Context, c *client.Client, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	text := ""
	for _, ct := range res.Content {
		if t, ok := ct.(mcp.TextContent); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s", name, text)
	}
	// The fields are JSON in the first content; student text, if any,
	// follows in a second one.
	var first string
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(mcp.TextContent); ok {
			first = t.Text
		}
	}
	var out map[string]any
	json.Unmarshal([]byte(first), &out)
	return out, nil
}

// interactive is the agent's terminal side.
func interactive(c *client.Client, sk *soak) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			cols, rows, _ := term.GetSize(0)
			fmt.Printf("winch %dx%d\r\n", cols, rows)
		}
	}()
	// Like the agent TUIs, Ctrl-C interrupts, it does not quit.
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	go func() {
		for range intr {
			fmt.Printf("interrupted\r\n")
		}
	}()
	fmt.Printf("stem-test-agent %s ready (%s)\n", os.Getenv("STEM_AGENT_ID"), filepath.Base(os.Getenv("STEM_MCP_CONFIG")))
	sc := bufio.NewScanner(os.Stdin)
	fmt.Print("agent> ")
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "ping":
			fmt.Printf("pong %s\n", os.Getenv("STEM_AGENT"))
		case line == "apc":
			// What Claude Code asks a terminal about kitty graphics.
			fmt.Printf("\x1b_Gi=31,s=1,v=1,a=q,t=d;AAAA\x1b\\apc sent\n")
		case line == "size":
			cols, rows, _ := term.GetSize(0)
			fmt.Printf("size %dx%d\n", cols, rows)
		case line == "events":
			mu.Lock()
			fmt.Printf("events %d: %s\n", len(events), strings.Join(events, "; "))
			mu.Unlock()
		case line == "status" && c != nil:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st, err := call(ctx, c, "session_status", nil)
			cancel()
			fmt.Printf("status %v %v\n", st["instance"], err)
		case (line == "soak pause" || line == "soak resume") && sk != nil:
			sk.pause(line == "soak pause")
		case line == "quit":
			return
		case strings.HasPrefix(line, "exit "):
			n, _ := strconv.Atoi(strings.TrimPrefix(line, "exit "))
			os.Exit(n)
		}
		fmt.Print("agent> ")
	}
}
