package mcpserver_test

// Auditing fails closed: an effectful call whose intent cannot be written
// to the audit log is refused and has no effect; a session whose start
// cannot be written is not served at all; a server that dies during a
// call leaves the call's intent behind.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/testenv"
)

// corruptTail appends a line that is not an entry, as a careless edit
// leaves it (the start of an entry a killed writer left is cut off by the
// next append instead). Root cannot append past it either.
func corruptTail(t testing.TB, state string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(state, "audit.jsonl"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"seq":99,"event":"tool_ca` + "\n"); err != nil {
		t.Fatal(err)
	}
}

// logIsDirectory puts a directory where the log is (open for writing
// fails with EISDIR, for root too); the returned func puts the log back.
func logIsDirectory(t testing.TB, state string) (restore func()) {
	t.Helper()
	p := filepath.Join(state, "audit.jsonl")
	if err := os.Rename(p, p+".saved"); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return func() {
		os.Remove(p)
		os.Rename(p+".saved", p)
	}
}

func mustReadFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEffectfulCallRefusedWhenAuditLogUnwritable(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	words := filepath.Join(in.Resolved.TaskDir, "words.c")
	logPath := filepath.Join(in.Dirs.State, "audit.jsonl")

	s := connect(t, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	before, found := st.bufferText(words)
	if !found {
		t.Fatal("words.c is not open")
	}

	// Each try is an effectful call that would change the buffer or the
	// pane; with the log unwritable it must be refused and change nothing.
	try := func(t *testing.T, tag string) {
		t.Helper()
		logBefore, _ := os.ReadFile(logPath)
		edit := map[string]any{"path": "t1/words.c", "start": 1, "end": 1, "lines": []any{"// EDIT-" + tag}}
		msg := s.refused("nvim_buffer_edit", edit)
		for _, w := range []string{"nvim_buffer_edit refused", "nothing was done", "audit log", "cannot be written", "stemctl audit verify"} {
			if !strings.Contains(msg, w) {
				t.Errorf("nvim_buffer_edit refusal does not say %q: %s", w, msg)
			}
		}
		keys := "echo KEYS-" + tag + "-$((6*7)){Enter}"
		if msg := s.refused("pane_send_keys", map[string]any{"pane": shell, "keys": keys}); !strings.Contains(msg, "cannot be written") {
			t.Errorf("pane_send_keys refusal: %s", msg)
		}
		s.refused("nvim_hint", map[string]any{"path": "t1/words.c", "line": 2, "text": "HINT-" + tag})
		// Read-only calls are not audited and go on working.
		rd := s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1})
		if l := readLines(t, rd); len(l) != 1 || strings.Contains(l[0].Text, "EDIT-") {
			t.Errorf("nvim_buffer_read after the refused edit: %+v", l)
		}
		s.ok("pane_capture", map[string]any{"pane": shell})
		// Nothing happened: the buffer, the pane, Neovim's hints (an edit
		// or a hint is done before the call answers).
		if after, _ := st.bufferText(words); after != before {
			t.Errorf("the refused edit changed the buffer:\n%s", after)
		}
		if text := st.shellBarrier(shell); strings.Contains(text, "KEYS-"+tag) {
			t.Errorf("the refused keys reached the pane:\n%s", text)
		}
		var marks int
		st.lua(&marks, `local n = 0
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  n = n + #vim.api.nvim_buf_get_extmarks(b, vim.api.nvim_create_namespace('stem-hint'), 0, -1, {})
end
return n`)
		if marks != 0 {
			t.Errorf("the refused hint was placed (%d marks)", marks)
		}
		if logAfter, _ := os.ReadFile(logPath); !bytes.Equal(logAfter, logBefore) {
			t.Errorf("the log changed:\n%s", logAfter[min(len(logBefore), len(logAfter)):])
		}
	}

	t.Run("corrupt last line", func(t *testing.T) {
		good := mustReadFile(t, logPath)
		corruptTail(t, in.Dirs.State)
		try(t, "CORRUPT")
		// Once the log is whole again, effectful calls work (and are
		// audited) again.
		if err := os.WriteFile(logPath, good, 0o600); err != nil {
			t.Fatal(err)
		}
		s.ok("nvim_hint", map[string]any{"path": "t1/words.c", "line": 2, "text": "back"})
		s.ok("nvim_hint", map[string]any{"path": "t1/words.c", "clear": true})
	})
	t.Run("log is a directory", func(t *testing.T) {
		restore := logIsDirectory(t, in.Dirs.State)
		defer restore()
		try(t, "DIR")
	})
	es, _ := readAudit(t, in.Dirs.State)
	if n := len(es); n < 5 || es[n-1].Event != audit.ToolCall || es[n-2].Event != audit.ToolIntent {
		t.Errorf("after the log is back the calls are audited again: %+v", es[max(0, n-4):])
	}
}

// procServer is stem-mcp on pipes, like rawServer, but a test also sees
// its exit status (and a reply that never comes once it has ended).
type procServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error
}

func startProc(t *testing.T, in *testenv.Instance, level string) *procServer {
	t.Helper()
	cmd := exec.Command(stemMCP(t), "serve", "--level", level)
	cmd.Env = in.Env
	w, _ := cmd.StdinPipe()
	r, _ := cmd.StdoutPipe()
	ep, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &procServer{cmd: cmd, stdin: w, lines: make(chan string, 64), exited: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				s.lines <- line
			}
			if err != nil {
				close(s.lines)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := ep.Read(buf)
			s.mu.Lock()
			s.stderr.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { wg.Wait(); s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		w.Close()
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

func (s *procServer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		t.Logf("write to stem-mcp: %v", err)
	}
}

// reply waits for the response with id; "" when the server ended first.
func (s *procServer) reply(t *testing.T, id int, timeout time.Duration) string {
	t.Helper()
	tag := fmt.Sprintf(`"id":%d`, id)
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return ""
			}
			if strings.Contains(line, tag+",") || strings.Contains(line, tag+"}") {
				return line
			}
		case <-deadline:
			t.Fatalf("no reply %d within %v; stderr: %s", id, timeout, s.stderrText())
		}
	}
}

func (s *procServer) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// exit waits for the process and returns its exit code.
func (s *procServer) exit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(timeout):
		t.Fatalf("stem-mcp still runs %v after refusing the session; stderr: %s", timeout, s.stderrText())
	}
	if ee, ok := s.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if s.err != nil {
		t.Fatalf("stem-mcp: %v", s.err)
	}
	return 0
}

const initializeReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"failclosed","version":"1"}}}`

// checkRefusedExit: the server ended non-zero with one line on stderr that
// says why.
func checkRefusedExit(t *testing.T, s *procServer) {
	t.Helper()
	if code := s.exit(t, 10*time.Second); code == 0 {
		t.Errorf("stem-mcp exited 0 after refusing the session")
	}
	errText := s.stderrText()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errText), "\n") {
		if strings.Contains(l, "audit") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "refusing to serve") || !strings.Contains(lines[0], "cannot be written") || !strings.Contains(lines[0], "stemctl audit verify") {
		t.Errorf("stderr does not say once, clearly, why the session was refused:\n%s", errText)
	}
}

// A session whose start cannot be audited is refused at initialize, and the
// server exits non-zero saying why.
func TestSessionRefusedWhenAuditLogUnwritable(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	logPath := filepath.Join(in.Dirs.State, "audit.jsonl")
	// A first session so the log exists.
	first := connect(t, in, "observe")
	first.ok("pane_list", nil)
	first.c.Close()
	waitUntil(t, 10*time.Second, "the first session ends", func() bool {
		es, _ := readAudit(t, in.Dirs.State)
		return len(es) > 0 && es[len(es)-1].Event == audit.SessionEnd
	})
	good := mustReadFile(t, logPath)

	for name, spoil := range map[string]func() func(){
		"corrupt last line": func() func() {
			corruptTail(t, in.Dirs.State)
			return func() { os.WriteFile(logPath, good, 0o600) }
		},
		"log is a directory": func() func() { return logIsDirectory(t, in.Dirs.State) },
	} {
		t.Run(name, func(t *testing.T) {
			restore := spoil()
			defer restore()
			for _, level := range []string{"observe", "assist"} {
				s := startProc(t, in, level)
				s.send(t, initializeReq)
				r := s.reply(t, 1, 20*time.Second)
				if !strings.Contains(r, `"error":{`) || !strings.Contains(r, "refuses to serve") || !strings.Contains(r, "cannot be written") || !strings.Contains(r, "stemctl audit verify") {
					t.Errorf("%s: initialize was not refused with the reason: %s", level, r)
				}
				// Whatever comes next is not served.
				s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pane_send_keys","arguments":{"pane":"`+shell+`","keys":"echo SERVED-$((6*7)){Enter}"}}}`)
				if r := s.reply(t, 2, 20*time.Second); r != "" && !strings.Contains(r, "cannot be written") {
					t.Errorf("%s: a call after the refused initialize: %s", level, r)
				}
				checkRefusedExit(t, s)
			}
			if text := st.shellBarrier(shell); strings.Contains(text, "SERVED-42") {
				t.Errorf("a refused session typed into the pane:\n%s", text)
			}
		})
	}
	// Nothing was appended while the log was broken.
	if now := mustReadFile(t, logPath); !bytes.Equal(now, good) {
		t.Errorf("the log changed while it could not be written:\n%s", now[min(len(good), len(now)):])
	}
}

// The log passes the check before initialize but the session_start entry
// itself fails (its head file cannot be written): the first call is
// refused with the reason and the server exits non-zero.
func TestSessionRefusedWhenSessionStartFails(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	in.AllowPane(t, shell)
	head := filepath.Join(in.Dirs.State, "audit.head")
	os.Remove(head)
	if err := os.MkdirAll(filepath.Join(head, "x"), 0o700); err != nil { // a directory: it cannot be opened for writing
		t.Fatal(err)
	}
	s := startProc(t, in, "assist")
	s.send(t, initializeReq)
	if r := s.reply(t, 1, 20*time.Second); !strings.Contains(r, `"result":{`) {
		t.Fatalf("initialize: %s", r)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pane_send_keys","arguments":{"pane":"`+shell+`","keys":"echo SERVED-$((6*7)){Enter}"}}}`)
	r := s.reply(t, 2, 20*time.Second)
	if !strings.Contains(r, "cannot be written") || !strings.Contains(r, "audit.head") {
		t.Errorf("the first call was not refused with the reason: %s", r)
	}
	checkRefusedExit(t, s)
	if text := st.shellBarrier(shell); strings.Contains(text, "SERVED-42") {
		t.Errorf("a refused session typed into the pane:\n%s", text)
	}
}

// A server killed during a long call leaves the call's intent, which
// verify reports as a call without an outcome.
func TestKilledServerLeavesTheIntent(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)
	s := startProc(t, in, "full")
	s.send(t, initializeReq)
	if r := s.reply(t, 1, 20*time.Second); !strings.Contains(r, `"result":{`) {
		t.Fatalf("initialize: %s", r)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pane_run","arguments":{"pane":"`+shell+`","command":"sleep 20","timeout_ms":60000}}}`)
	st.waitPane(shell, `sleep 20`, 20*time.Second)
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	l, err := audit.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Verify()
	if err != nil || !res.OK {
		t.Fatalf("verify: %+v %v", res, err)
	}
	if res.UnfinishedCount != 1 || res.Unfinished[0].Tool != "pane_run" || res.Unfinished[0].Instance != in.Name {
		es, _ := readAudit(t, in.Dirs.State)
		t.Fatalf("unfinished = %+v\n%+v", res.Unfinished, es)
	}
	es, _ := l.Read(audit.Filter{Event: audit.ToolIntent})
	if len(es) != 1 || es[0].ContainerID != in.Record.ContainerID || es[0].Level != "full" || es[0].Account == "" || es[0].ArgsDigest == "" {
		t.Fatalf("intent = %+v", es)
	}
}
