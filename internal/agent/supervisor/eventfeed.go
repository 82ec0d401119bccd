package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/stem-edu/stem/internal/sessionevent"
)

// SessionEvent is a stem event (sent as an MCP logging notification with
// logger "stem.events") the supervisor turns into a line for the agent.
type SessionEvent struct {
	sessionevent.Event
	// Received is when the supervisor read it (not sent by stem-mcp).
	Received time.Time `json:"-"`
}

// feedEvents runs argv (the agent's own `stem-mcp serve`, at its level and
// under its agent policy, so an agent that may not see the session's
// events gets none this way either) as an MCP client over its standard
// input and output, and sends the session events it is notified of to
// out until ctx ends. A server that ends is started again after a pause.
func feedEvents(ctx context.Context, argv, env []string, out chan<- SessionEvent, logw io.Writer, lg *log.Logger) {
	pause := time.Second
	for ctx.Err() == nil {
		t0 := time.Now()
		err := feedOnce(ctx, argv, env, out, logw)
		if ctx.Err() != nil {
			return
		}
		lg.Printf("event feed: %v; again in %s", err, pause)
		if time.Since(t0) > time.Minute {
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// rpcMsg is a JSON-RPC message as stem-mcp's stdio transport writes it
// (one per line).
type rpcMsg struct {
	ID     *json.RawMessage `json:"id,omitempty"`
	Method string           `json:"method,omitempty"`
	Params json.RawMessage  `json:"params,omitempty"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result,omitempty"`
}

func feedOnce(ctx context.Context, argv, env []string, out chan<- SessionEvent, logw io.Writer) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Env = env
	// The CLI's own stem-mcp writes to the same log: the feed's lines say
	// whose they are.
	feedLog := &prefixLines{w: logw, prefix: []byte("event feed: ")}
	defer feedLog.flush()
	cmd.Stderr = feedLog
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	send := func(v map[string]any) error {
		v["jsonrpc"] = "2.0"
		b, _ := json.Marshal(v)
		_, err := stdin.Write(append(b, '\n'))
		return err
	}
	// initialize, then one session_events call: stem-mcp dials the
	// instance (and starts watching its panes and gdb) at the first call.
	if err := send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "stemctl-agent-events", "version": "1"}}}); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	initialized := false
	for sc.Scan() {
		var m rpcMsg
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.ID != nil && !initialized:
			if m.Error != nil {
				return fmt.Errorf("initialize: %s", m.Error.Message)
			}
			initialized = true
			send(map[string]any{"method": "notifications/initialized"})
			send(map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{
				"name": "session_events", "arguments": map[string]any{}}})
		case m.ID != nil && m.Error != nil:
			return fmt.Errorf("session_events: %s", m.Error.Message)
		case m.ID != nil && m.Result != nil && m.Result.IsError:
			msg := ""
			if len(m.Result.Content) > 0 {
				msg = m.Result.Content[0].Text
			}
			return fmt.Errorf("session_events: %.200s", msg)
		case m.Method == "notifications/message":
			var p struct {
				Logger string       `json:"logger"`
				Data   SessionEvent `json:"data"`
			}
			if json.Unmarshal(m.Params, &p) != nil || p.Logger != "stem.events" {
				continue
			}
			p.Data.Received = time.Now()
			select {
			case out <- p.Data:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", argv[0], err)
	}
	return fmt.Errorf("%s ended", argv[0])
}

// prefixLines writes each line written to it to w, prefix first. A line
// longer than maxPartial is written in pieces, each with the prefix.
type prefixLines struct {
	w      io.Writer
	prefix []byte
	buf    []byte
}

const maxPartial = 64 << 10

func (p *prefixLines) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if err := p.line(p.buf[:i+1]); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) > maxPartial {
		return len(b), p.flush()
	}
	return len(b), nil
}

// flush writes what is left of a line without its newline.
func (p *prefixLines) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	err := p.line(append(p.buf, '\n'))
	p.buf = nil
	return err
}

func (p *prefixLines) line(l []byte) error {
	_, err := p.w.Write(append(append([]byte{}, p.prefix...), l...))
	return err
}
