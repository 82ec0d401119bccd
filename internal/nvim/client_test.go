package nvim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

func TestDialErrors(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	if _, err := Dial(ctx, filepath.Join(dir, "missing.sock"), Options{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("missing socket: %v, want ErrUnavailable", err)
	}
	plain := writeFile(t, dir, "plain", "")
	if _, err := Dial(ctx, plain, Options{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("regular file: %v, want ErrUnavailable", err)
	}
	// A stale socket left by a killed Neovim refuses connections.
	n := nvimtest.Start(t, nvimtest.Options{NoUI: true})
	n.Kill(t)
	_, err := Dial(ctx, n.Socket, Options{})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "stale socket") {
		t.Errorf("stale socket: %v", err)
	}
}

// opsUnderTest runs every Client operation once; each returns its error.
func opsUnderTest(c *Client, buf int, path string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"ReadBuffer":  func(ctx context.Context) error { _, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0); return err },
		"Diagnostics": func(ctx context.Context) error { _, err := c.Diagnostics(ctx, 0); return err },
		"Open":        func(ctx context.Context) error { _, err := c.Open(ctx, path); return err },
		"SetLines": func(ctx context.Context) error {
			_, err := c.SetLines(ctx, buf, 1, 1, []string{"CHANGED"})
			return err
		},
		"Hint":       func(ctx context.Context) error { _, err := c.Hint(ctx, buf, 1, "agent a", "hint"); return err },
		"ClearHints": func(ctx context.Context) error { _, err := c.ClearHints(ctx, 0); return err },
		"Command":    func(ctx context.Context) error { _, err := c.Command(ctx, "let g:stem_ran = 1"); return err },
		"Lua":        func(ctx context.Context) error { _, err := c.Lua(ctx, "vim.g.stem_ran = 1", nil); return err },
	}
}

// At a prompt Neovim serves no ordinary request: every operation must
// return ErrBlocked quickly, do nothing, and Status must say why.
func TestBlockedAtPrompts(t *testing.T) {
	cases := []struct {
		name, keys string
		mode       string
		// after is the first line once the student releases the prompt with
		// <Esc>: only <C-v> inserts the <Esc> itself.
		after string
		// terminalOnly: Neovim 0.7 shows -- More -- only to its terminal
		// UI, not to an RPC-attached one.
		terminalOnly bool
	}{
		{"press-enter", `:echo "a\nb\nc"<CR>`, "r", "original", false},
		{"more", `:for i in range(200) | echo i | endfor<CR>`, "rm", "original", true},
		{"confirm", `:call confirm('Save?', "&Yes\n&No")<CR>`, "r?", "original", false},
		{"pending-register", `"`, "n", "original", false},
		{"pending-window-command", `<C-w>`, "n", "original", false},
		{"insert-ctrl-v", `i<C-v>`, "i", "\x1boriginal", false},
	}
	for _, ui := range []string{"rpc-ui", "terminal"} {
		for _, tc := range cases {
			if tc.terminalOnly && ui != "terminal" {
				continue
			}
			t.Run(ui+"/"+tc.name, func(t *testing.T) {
				n, c := start(t, nvimtest.Options{Terminal: ui == "terminal"})
				p := writeFile(t, n.Dir, "f.c", "original\n")
				other := writeFile(t, n.Dir, "other.c", "other\n")
				buf := edit(t, n, p)
				n.Input(t, tc.keys)
				n.WaitMode(t, func(m string, b bool) bool { return m == tc.mode && b })

				for name, op := range opsUnderTest(c, buf, other) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					t0 := time.Now()
					err := op(ctx)
					late := ctx.Err() != nil
					cancel()
					var be *BlockedError
					if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) || be.Mode != tc.mode {
						t.Errorf("%s: %v, want ErrBlocked in mode %s", name, err, tc.mode)
					} else if want := "Neovim is waiting for the student's input (mode " + tc.mode + "): nothing was done"; err.Error() != want {
						t.Errorf("%s: message %q", name, err.Error())
					}
					// At once, not by running out of its time at the prompt.
					if late {
						t.Errorf("%s returned after its deadline (%v)", name, time.Since(t0))
					}
				}
				st, err := c.Status(testCtx(t))
				if err != nil || !st.Waiting || st.Mode != tc.mode || !st.Blocking || st.Buffers != nil {
					t.Errorf("Status at prompt: %+v, %v", st, err)
				}

				// Release the prompt as the student would, then check nothing ran.
				for i := 0; ; i++ {
					n.Input(t, "<Esc>")
					time.Sleep(20 * time.Millisecond)
					if m, b := n.Mode(t); m == "n" && !b {
						break
					}
					if i == 50 {
						t.Fatal("could not leave the prompt")
					}
				}
				if got := bufLines(t, n, buf); len(got) != 1 || got[0] != tc.after {
					t.Errorf("buffer changed: %q", got)
				}
				var cur string
				var ran int
				n.Lua(t, &cur, `return vim.api.nvim_buf_get_name(0)`)
				n.Lua(t, &ran, `return vim.g.stem_ran or 0`)
				if cur != p || ran != 0 {
					t.Errorf("after prompt: current %q (want %q), command ran %d", cur, p, ran)
				}
				if _, err := c.ReadBuffer(testCtx(t), Buf(buf), 1, 0, 0); err != nil {
					t.Errorf("after prompt: %v", err)
				}
			})
		}
	}
}

// In command-line mode (":", input()) Neovim 0.7 still serves requests, so
// reads work; anything that acts is refused, and what the student is typing
// survives.
func TestCommandLineModes(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		t.Run(uiName(terminal), func(t *testing.T) { testCommandLineModes(t, terminal) })
	}
}

func uiName(terminal bool) string {
	if terminal {
		return "terminal"
	}
	return "rpc-ui"
}

func testCommandLineModes(t *testing.T, terminal bool) {
	n, c := start(t, nvimtest.Options{Terminal: terminal})
	p := writeFile(t, n.Dir, "f.c", "original\n")
	other := writeFile(t, n.Dir, "other.c", "other\n")
	buf := edit(t, n, p)

	check := func(t *testing.T) {
		t.Helper()
		// Reads and hints (virtual text, which does not touch the command
		// line) are served; everything else is refused.
		served := map[string]bool{"ReadBuffer": true, "Diagnostics": true, "Hint": true, "ClearHints": true}
		for name, op := range opsUnderTest(c, buf, other) {
			err := op(testCtx(t))
			switch {
			case served[name] && err != nil:
				t.Errorf("%s in mode c: %v", name, err)
			case !served[name] && !errors.Is(err, ErrBlocked):
				t.Errorf("%s in mode c: %v, want ErrBlocked", name, err)
			}
		}
		st, err := c.Status(testCtx(t))
		if err != nil || st.Mode != "c" || st.Waiting || st.Buffer != buf {
			t.Errorf("Status in mode c: %+v %v", st, err)
		}
	}

	t.Run("colon", func(t *testing.T) {
		n.Input(t, ":let g:typed = 'by student'")
		n.WaitMode(t, func(m string, _ bool) bool { return m == "c" })
		check(t)
		n.Input(t, "<CR>")
		n.WaitMode(t, func(m string, _ bool) bool { return m == "n" })
		var typed string
		n.Lua(t, &typed, `return vim.g.typed`)
		if typed != "by student" {
			t.Errorf("the student's command line was disturbed: g:typed = %q", typed)
		}
	})
	t.Run("input", func(t *testing.T) {
		n.Input(t, ":let g:answer = input('name? ')<CR>")
		n.WaitMode(t, func(m string, _ bool) bool { return m == "c" })
		n.Input(t, "bo")
		check(t)
		n.Input(t, "b<CR>")
		n.WaitMode(t, func(m string, _ bool) bool { return m == "n" })
		var answer string
		n.Lua(t, &answer, `return vim.g.answer`)
		if answer != "bob" {
			t.Errorf("input() got %q, want bob", answer)
		}
	})
	if got := bufLines(t, n, buf); got[0] != "original" {
		t.Errorf("buffer changed: %q", got)
	}
}

// getchar() in Neovim 0.7 keeps serving requests and reports mode "n",
// non-blocking: nothing can tell it apart, and nothing hangs.
func TestGetchar(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		t.Run(uiName(terminal), func(t *testing.T) { testGetchar(t, terminal) })
	}
}

func testGetchar(t *testing.T, terminal bool) {
	n, c := start(t, nvimtest.Options{Terminal: terminal})
	buf := edit(t, n, writeFile(t, n.Dir, "f.c", "x\n"))
	n.Input(t, ":let g:before = 1 | let g:ch = getchar()<CR>")
	// Requests are served only once Neovim waits for a key, so seeing
	// g:before set means the command line has reached getchar().
	deadline := time.Now().Add(5 * time.Second)
	for {
		var before int
		n.Lua(t, &before, `return vim.g.before or 0`)
		if before == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("getchar() never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0); err != nil {
		t.Errorf("ReadBuffer during getchar(): %v", err)
	}
	if st, err := c.Status(ctx); err != nil || st.Waiting {
		t.Errorf("Status during getchar(): %+v %v", st, err)
	}
	n.Input(t, "z")
	deadline = time.Now().Add(5 * time.Second)
	for {
		var ch int
		n.Lua(t, &ch, `return vim.g.ch or 0`)
		if ch == 'z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("getchar() did not get the student's key, got %d", ch)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Neovim that is busy (or hung) answers nothing, not even nvim_get_mode:
// the caller's deadline must still hold, and a later call must work again.
func TestDeadline(t *testing.T) {
	n, _ := start(t, nvimtest.Options{})
	var mu sync.Mutex
	var reports []Reconnect
	c, err := Dial(testCtx(t), n.Socket, Options{
		CallTimeout: time.Second,
		OnReconnect: func(r Reconnect) { mu.Lock(); reports = append(reports, r); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Busy for 4 s in Lua, as a runaway plugin would be. The loop creates
	// a file as it starts: waiting for that (rather than a fixed pause)
	// makes sure Neovim is busy before the call, also under load.
	// It creates another as it ends: a call that returns while that one is
	// missing returned on its deadline, not once Neovim was free.
	busy, free := filepath.Join(t.TempDir(), "busy"), filepath.Join(t.TempDir(), "free")
	n.Input(t, ":lua io.open('"+busy+"', 'w'):close() local t = vim.loop.hrtime() while vim.loop.hrtime() - t <lt> 4e9 do end io.open('"+free+"', 'w'):close()<CR>")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(busy); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Neovim never started the busy loop")
		}
	}

	stillBusy := func() bool { _, err := os.Stat(free); return err != nil }
	t0 := time.Now()
	_, err = c.ReadBuffer(context.Background(), Buf(1), 1, 0, 0)
	if d := time.Since(t0); !stillBusy() {
		t.Errorf("call with a 1 s timeout returned after %v, once Neovim was free", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("busy nvim: %v, want DeadlineExceeded", err)
	}
	// The caller's shorter deadline wins over CallTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	t0 = time.Now()
	_, err = c.Status(ctx)
	cancel()
	if d := time.Since(t0); d >= time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("short ctx: %v after %v, not before CallTimeout (1 s)", err, d)
	}

	// Once Neovim is free again the next call redials and works.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Status(context.Background())
		if err == nil && st.Mode == "n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never recovered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !strings.Contains(reports[0].Reason, "timed out") {
		t.Errorf("reconnect reports %+v", reports)
	}
}

// Neovim killed and restarted on the same socket: the next call redials
// transparently and the reconnect is reported.
func TestReconnect(t *testing.T) {
	n, _ := start(t, nvimtest.Options{})
	var mu sync.Mutex
	var reports []Reconnect
	c, err := Dial(testCtx(t), n.Socket, Options{
		CallTimeout: 2 * time.Second,
		OnReconnect: func(r Reconnect) { mu.Lock(); reports = append(reports, r); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	pid := func() int64 {
		t.Helper()
		v, err := c.Lua(ctx, "return vim.fn.getpid()", nil)
		if err != nil {
			t.Fatal(err)
		}
		switch v := v.(type) {
		case int64:
			return v
		case uint64:
			return int64(v)
		}
		t.Fatalf("getpid() returned %T", v)
		return 0
	}
	first := pid()

	// Killed and restarted between two calls: transparent.
	n.Restart(t)
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("Status after restart: %v", err)
	}
	second := pid()
	if second == first || c.Reconnects() != 1 {
		t.Errorf("pids %d -> %d, reconnects %d", first, second, c.Reconnects())
	}

	// Killed and not yet back: a clear ErrUnavailable, then recovery.
	n.Kill(t)
	if _, err := c.Status(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Status with nvim down: %v, want ErrUnavailable", err)
	}
	if _, err := c.SetLines(ctx, 1, 1, 1, []string{"x"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("SetLines with nvim down: %v, want ErrUnavailable", err)
	}
	n.Restart(t)
	if third := pid(); third == second {
		t.Errorf("still talking to pid %d", third)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 2 || reports[1].Count != 2 || reports[0].Socket != n.Socket ||
		!strings.Contains(reports[0].Reason, "closed the connection") {
		t.Errorf("reports %+v", reports)
	}

	c.Close()
	if _, err := c.Status(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestSocketPathShort(t *testing.T) {
	n := nvimtest.Start(t, nvimtest.Options{NoUI: true})
	if len(n.Socket) >= nvimtest.MaxSocketPath {
		t.Errorf("socket path %d bytes: %s", len(n.Socket), n.Socket)
	}
	fi, err := os.Stat(filepath.Dir(n.Socket))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v %v", fi.Mode(), err)
	}
}

// Many goroutines through a restart: no deadlock, no race, one redial.
func TestConcurrentCallsAcrossRestart(t *testing.T) {
	n, _ := start(t, nvimtest.Options{})
	var c *Client
	c, err := Dial(testCtx(t), n.Socket, Options{
		CallTimeout: 2 * time.Second,
		OnReconnect: func(Reconnect) { _ = c.Reconnects() }, // may call back in
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := edit(t, n, writeFile(t, n.Dir, "f.c", "x\n"))
	n.Restart(t)
	edit(t, n, filepath.Join(n.Dir, "f.c"))
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); _, err := c.Status(testCtx(t)); errs <- err }()
		go func() { defer wg.Done(); _, err := c.ReadBuffer(testCtx(t), Buf(buf), 1, 0, 0); errs <- err }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := c.Reconnects(); got != 1 {
		t.Errorf("%d reconnects, want 1", got)
	}
}
