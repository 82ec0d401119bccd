package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/tmux"
)

// These tests run the stemctl and stem-mcp binaries against real Podman
// containers of the profile images: the student's Neovim with stem's
// plugin (containers/files/nvim), tmux, gdb or gdb-multiarch and QEMU, all
// inside the container. The test reads the editor's state over n.sock and
// types as the student through tmux.

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBinaries()
	os.Exit(code)
}

// layout is what `stemctl debug --json` prints.
type layout struct {
	Instance    string   `json:"instance"`
	ProgramPane string   `json:"program_pane"`
	GDBPane     string   `json:"gdb_pane"`
	EditorPane  string   `json:"editor_pane"`
	Files       []string `json:"files"`
}

// session is one student's instance with its debug layout.
type session struct {
	t    testing.TB
	a    *testenv.Account
	inst string
	dir  string // socket directory
	card string
	tc   *tmux.Client
	v    *nvim.Nvim
	lay  layout
}

func newSession(t testing.TB, profile, series, card, task string, up ...string) *session {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real containers (skipped with -short)")
	}
	testenv.Binary(t, "stemctl", "./cmd/stemctl")
	bin := testenv.Binary(t, "stem-mcp", "./cmd/stem-mcp")
	s := &session{t: t, a: testenv.NewAccount(t, bin, testenv.AccountOptions{})}
	s.requirePlugin(profile)
	s.stemctl(append([]string{"up", profile, series, card, task}, up...)...)
	var st struct {
		Record struct {
			Instance  string `json:"instance"`
			SocketDir string `json:"socket_dir"`
			CardPath  string `json:"card_path"`
		} `json:"record"`
	}
	name := fmt.Sprintf("%s-%s-%s-t%s", profile, series, card, task)
	if i := slices.Index(up, "--target"); i >= 0 && i+1 < len(up) {
		name += "-" + up[i+1][strings.LastIndex(up[i+1], "-")+1:] // rp2350-arm: -arm
	} else if profile == "rp2350" {
		name += "-rv"
	}
	s.stemctlJSON(&st, "status", name)
	s.inst, s.dir, s.card = st.Record.Instance, st.Record.SocketDir, st.Record.CardPath
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc, err := tmux.Dial(ctx, tmux.Options{Socket: filepath.Join(s.dir, "t.sock"), Session: "stem"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	v, err := nvim.Dial(filepath.Join(s.dir, "n.sock"), nvim.DialContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	s.tc, s.v = tc, v
	// The student's terminal: wide enough that gdb does not wrap its lines.
	s.stemctl("exec", s.inst, "--", "tmux", "-S", filepath.Join(s.dir, "t.sock"), "resize-window", "-t", "stem:edit", "-x", "160", "-y", "40")
	return s
}

// requirePlugin fails with the fix when the profile image predates the
// editor plugin (the images are built separately from the binaries).
func (s *session) requirePlugin(profile string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "run", "--rm", "--network", "none", "localhost/stem-"+profile+":latest",
		"test", "-f", "/etc/xdg/nvim/lua/stem/debug.lua")
	cmd.Env = append(os.Environ(), s.a.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("the %s image has no stem editor plugin (/etc/xdg/nvim/lua/stem): rebuild the images with `make images` (%v: %s)", profile, err, out)
	}
}

func (s *session) stemctl(args ...string) string {
	s.t.Helper()
	r, err := s.a.Run(nil, args...)
	if err != nil || r.Code != 0 {
		s.t.Fatalf("stemctl %s: exit %d %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, err, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (s *session) stemctlJSON(v any, args ...string) {
	s.t.Helper()
	out := s.stemctl(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		s.t.Fatalf("stemctl %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// debug runs `stemctl debug` on the instance and returns how long it took.
func (s *session) debug(args ...string) time.Duration {
	s.t.Helper()
	t0 := time.Now()
	s.stemctlJSON(&s.lay, append([]string{"debug", s.inst}, args...)...)
	return time.Since(t0)
}

// shown is what a client attached to the student's session shows: the
// session's current window and that window's active pane, asked of the
// container's own tmux.
func (s *session) shown() (window, pane string) {
	s.t.Helper()
	out := s.stemctl("exec", s.inst, "--", "tmux", "-S", filepath.Join(s.dir, "t.sock"), "display-message", "-p", "-t", "stem:", "#{window_name} #{pane_id}")
	window, pane, _ = strings.Cut(strings.TrimSpace(out), " ")
	return window, pane
}

// keys types as the student into a pane: text, then named keys.
func (s *session) keys(pane string, text string, names ...string) {
	s.t.Helper()
	var ks []tmux.Key
	if text != "" {
		ks = append(ks, tmux.Key{Text: text})
	}
	for _, n := range names {
		ks = append(ks, tmux.Key{Name: n})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.tc.SendKeys(ctx, tmux.PaneID(pane), ks); err != nil {
		s.t.Fatal(err)
	}
}

// ex runs an Ex command in the editor as the student types it.
func (s *session) ex(cmd string) { s.t.Helper(); s.keys(s.lay.EditorPane, ":"+cmd, "Enter") }

// gdb types a command into the gdb pane.
func (s *session) gdb(cmd string) { s.t.Helper(); s.keys(s.lay.GDBPane, cmd, "Enter") }

func (s *session) capture(pane string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.tc.Capture(ctx, tmux.PaneID(pane), tmux.CaptureOptions{Join: true})
	if err != nil {
		s.t.Fatal(err)
	}
	return r.Text
}

// editorView is what the test reads of the editor: the plugin's state, the
// mode, the current buffer and window count, and every stem sign as
// "file:SIGN@line" in one sorted string.
type editorView struct {
	Connected  bool   `json:"connected"`
	State      string `json:"state"`
	Status     string `json:"status"`
	Stops      int    `json:"stops"`
	Pending    bool   `json:"pending_jump"`
	Mode       string `json:"mode"`
	Cur        string `json:"cur"`
	CurMod     bool   `json:"cur_modified"`
	CurLine1   string `json:"cur_line1"`
	Wins       int    `json:"wins"`
	Listed     string `json:"listed"`
	Signs      string `json:"signs"`
	LastRxNs   int64  `json:"last_rx_ns"`
	LastSignNs int64  `json:"last_sign_ns"`
}

const viewLua = `
local d = require('stem.debug').info()
local cur = vim.api.nvim_get_current_buf()
local listed, signs = {}, {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(b), ':t')
  if vim.bo[b].buflisted then listed[#listed + 1] = name end
  for _, p in ipairs(vim.fn.sign_getplaced(b, { group = 'stem' })) do
    for _, sg in ipairs(p.signs) do signs[#signs + 1] = name .. ':' .. sg.name .. '@' .. sg.lnum end
  end
end
table.sort(signs)
return vim.json.encode({
  connected = d.connected, state = d.state, status = d.status, stops = d.stops, pending_jump = d.pending_jump,
  mode = vim.api.nvim_get_mode().mode, cur = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(cur), ':t'),
  cur_modified = vim.bo[cur].modified, cur_line1 = vim.api.nvim_buf_get_lines(cur, 0, 1, false)[1] or '',
  wins = #vim.api.nvim_tabpage_list_wins(0), listed = table.concat(listed, ' '), signs = table.concat(signs, ' '),
  last_rx_ns = d.last_rx_ns or 0, last_sign_ns = d.last_sign_ns or 0,
})`

func (s *session) view() (editorView, error) {
	var out string
	var v editorView
	if err := s.v.ExecLua(viewLua, &out); err != nil {
		return v, err
	}
	err := json.Unmarshal([]byte(out), &v)
	return v, err
}

// waitView polls the editor until ok accepts its view.
func (s *session) waitView(what string, ok func(editorView) bool) editorView {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last editorView
	var err error
	for time.Now().Before(deadline) {
		if last, err = s.view(); err == nil && ok(last) {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("the editor never showed %s; last %+v (err %v)\neditor pane:\n%s\ngdb pane:\n%s", what, last, err,
		s.capture(s.lay.EditorPane), s.capture(s.lay.GDBPane))
	return last
}

// noInternalErrors fails on an error the plugin reported about itself.
func (s *session) noInternalErrors() {
	s.t.Helper()
	var msgs string
	if err := s.v.Eval(`execute("messages")`, &msgs); err != nil {
		s.t.Fatal(err)
	}
	if strings.Contains(msgs, "stem: internal error") || strings.Contains(msgs, "/lua/stem/") {
		s.t.Fatalf("the editor plugin reported errors:\n%s", msgs)
	}
}

// waitPane polls a pane until it shows want.
func (s *session) waitPane(pane, want string) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var text string
	for time.Now().Before(deadline) {
		if text = s.capture(pane); strings.Contains(text, want) {
			return text
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("pane %s never showed %q:\n%s", pane, want, text)
	return text
}

// hasSigns reports whether every "file:SIGN@line" of want is placed.
func hasSigns(v editorView, want ...string) bool {
	have := " " + v.Signs + " "
	for _, w := range want {
		if !strings.Contains(have, " "+w+" ") {
			return false
		}
	}
	return true
}

// screenshot renders the window's panes as tmux lays them out, with the
// borders tmux draws: as plain text, and as an SVG with the colours of
// capture-pane -e.
func (s *session) screenshot() (text, image string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type pane struct{ x, y, w, h int }
	var panes []pane
	var shots [][]string
	maxW, maxH := 0, 0
	for _, id := range []string{s.lay.EditorPane, s.lay.ProgramPane, s.lay.GDBPane} {
		var p pane
		for _, f := range []struct {
			name string
			to   *int
		}{{"pane_left", &p.x}, {"pane_top", &p.y}, {"pane_width", &p.w}, {"pane_height", &p.h}} {
			v, err := s.tc.DisplayFormat(ctx, tmux.PaneID(id), f.name)
			if err != nil {
				s.t.Fatal(err)
			}
			*f.to, _ = strconv.Atoi(v)
		}
		r, err := s.tc.Capture(ctx, tmux.PaneID(id), tmux.CaptureOptions{Escapes: true})
		if err != nil {
			s.t.Fatal(err)
		}
		panes = append(panes, p)
		shots = append(shots, strings.Split(r.Text, "\n"))
		maxW, maxH = max(maxW, p.x+p.w), max(maxH, p.y+p.h)
	}
	grid := make([][]cell, maxH)
	for i := range grid {
		grid[i] = parseSGR("", maxW)
	}
	border := cell{fg: borderFG}
	for k, p := range panes {
		for r := 0; r < p.h && r < len(shots[k]); r++ {
			copy(grid[p.y+r][p.x:p.x+p.w], parseSGR(shots[k][r], p.w))
		}
		if p.x > 0 {
			for r := p.y; r < p.y+p.h; r++ {
				border.r = '│'
				grid[r][p.x-1] = border
			}
		}
		if p.y > 0 {
			for c := p.x; c < p.x+p.w; c++ {
				border.r = '─'
				grid[p.y-1][c] = border
			}
		}
	}
	var b strings.Builder
	for _, row := range grid {
		var line strings.Builder
		for _, c := range row {
			line.WriteRune(c.r)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String(), svg(grid)
}
