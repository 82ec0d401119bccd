package soak_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcpProc is a stem-mcp process the soak started and its MCP client.
type mcpProc struct {
	cmd *exec.Cmd
	c   *client.Client
	// full counts its collections that began with the heap near its goal
	// (its gctrace lines): after one, its memory is at its working size.
	full atomic.Int64
}

// countFull reads the Go runtime's gctrace lines ("gc N @T P%: …, A->B->C
// MB, D MB goal, …") and counts those where A, the heap when the
// collection began, reached half the goal D: a collection the heap's
// growth set off, not the runtime's periodic one.
func (p *mcpProc) countFull(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "gc ") {
			continue
		}
		var from, goal float64
		for _, f := range strings.Split(l, ",") {
			f = strings.TrimSpace(f)
			if a, _, ok := strings.Cut(f, "->"); ok && strings.HasSuffix(f, " MB") {
				from, _ = strconv.ParseFloat(a, 64)
			} else if g, ok := strings.CutSuffix(f, " MB goal"); ok {
				goal, _ = strconv.ParseFloat(g, 64)
			}
		}
		if goal > 0 && from >= goal/2 {
			p.full.Add(1)
		}
	}
}

// startMCP starts bin with args and env and does the MCP handshake.
func startMCP(tb testing.TB, bin string, env []string, args ...string) *mcpProc {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	// gctrace tells when its heap has grown to its collection goal.
	cmd.Env = append(append([]string(nil), env...), "GODEBUG=gctrace=1")
	// Its own group: stop takes the ssh children of `stem-mcp class` too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &mcpProc{cmd: cmd, c: client.NewClient(transport.NewIO(out, in, io.NopCloser(strings.NewReader(""))))}
	go p.countFull(errOut)
	tb.Cleanup(p.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.c.Start(ctx); err != nil {
		tb.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stem-soak", Version: "1"}
	if _, err := p.c.Initialize(ctx, req); err != nil {
		tb.Fatalf("%s %v: initialize: %v", filepath.Base(bin), args, err)
	}
	return p
}

func (p *mcpProc) pid() int { return p.cmd.Process.Pid }

func (p *mcpProc) stop() {
	p.c.Close()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
}

// call calls a tool; a tool error is an error, with its text.
func (p *mcpProc) call(name string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, text.String())
	}
	return text.String(), nil
}

// firstPane is the id of the first pane pane_list shows.
func firstPane(p *mcpProc) (string, error) {
	text, err := p.call("pane_list", nil)
	if err != nil {
		return "", err
	}
	var out struct {
		Panes []struct {
			ID string `json:"id"`
		} `json:"panes"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil || len(out.Panes) == 0 {
		return "", fmt.Errorf("pane_list: no pane in %q (%v)", text, err)
	}
	return out.Panes[0].ID, nil
}

// loops runs paced callers and can hold them all between calls.
type loops struct {
	// Each call holds gate shared; hold takes it whole, so it returns
	// once no call is in flight, and none starts until release.
	gate   sync.RWMutex
	calls  atomic.Int64
	errs   atomic.Int64
	mu     sync.Mutex
	first  []string // the first errors, for the report
	stopCh chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func newLoops() *loops { return &loops{stopCh: make(chan struct{})} }

// every calls fn at the pace d, starting after offset (to spread the
// callers over the period), until stop.
func (l *loops) every(offset, d time.Duration, name string, fn func() error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		select {
		case <-time.After(offset):
		case <-l.stopCh:
			return
		}
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			l.gate.RLock()
			err := fn()
			l.gate.RUnlock()
			l.calls.Add(1)
			if err != nil {
				l.errs.Add(1)
				l.mu.Lock()
				if len(l.first) < 5 {
					l.first = append(l.first, name+": "+err.Error())
				}
				l.mu.Unlock()
			}
			select {
			case <-tick.C:
			case <-l.stopCh:
				return
			}
		}
	}()
}

func (l *loops) hold()    { l.gate.Lock() }
func (l *loops) release() { l.gate.Unlock() }

func (l *loops) stop() {
	l.once.Do(func() { close(l.stopCh) })
	l.wg.Wait()
}

func (l *loops) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.first...)
}
