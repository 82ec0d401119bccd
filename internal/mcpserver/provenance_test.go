package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmd/audit/blame"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// blameLine is one line of `stemctl audit blame --json`.
type blameLine struct {
	N    int    `json:"n"`
	By   string `json:"by"`
	Text string `json:"text"`
	Who  *struct {
		Agent string `json:"agent"`
		Level string `json:"level"`
	} `json:"who"`
	AcceptedBy string `json:"accepted_by"`
	Unaccepted *struct {
		ID string `json:"id"`
	} `json:"unaccepted_proposal"`
}

// blameOf runs `stemctl audit blame --json` on a file of the fixture's
// card and returns its lines.
func blameOf(t *testing.T, in *testenv.Instance, file string) []blameLine {
	t.Helper()
	ios, _, out, _ := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return in.Dirs, nil },
		Workspace: func() (*workspace.Workspace, error) { return workspace.Open(in.Resolved.Workspace) },
	}
	if err := blame.Run(context.Background(), &blame.Options{F: f, File: file, JSON: true}); err != nil {
		t.Fatalf("audit blame %s: %v", file, err)
	}
	var rep struct {
		Lines    []blameLine `json:"lines"`
		Problems []any       `json:"problems"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("audit blame --json: %v\n%s", err, out)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("problems with the records: %v", rep.Problems)
	}
	return rep.Lines
}

// attribution is blame as marker -> writer ("container" or the agent id),
// where marker picks lines by a substring; every line no marker picks
// must be the container's.
func checkBlame(t *testing.T, lines []blameLine, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	var report strings.Builder
	bad := false
	for _, l := range lines {
		who := l.By
		if l.Who != nil {
			who = l.Who.Agent
			if l.Who.Level != "assist" {
				bad = true
			}
		}
		exp := "container"
		for m, w := range want {
			if strings.Contains(l.Text, m) {
				exp, seen[m] = w, true
			}
		}
		mark := "  "
		if who != exp {
			mark, bad = "!!", true
		}
		report.WriteString(mark + " " + who + "\t" + l.Text + "\n")
	}
	for m := range want {
		if !seen[m] {
			bad = true
			report.WriteString("missing: " + m + "\n")
		}
	}
	if bad {
		t.Fatalf("blame (!! = wrong):\n%s", report.String())
	}
}

// TestBlameRealFlow: two agents edit a buffer through nvim_buffer_edit,
// the student changes and reverts lines with keys typed into Neovim and
// saves; blame tells the lines apart, and still does after Neovim is
// restarted and after the container is re-created.
func TestBlameRealFlow(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	a := connect(t, in, "assist", "--agent", "aaaaaa")
	b := connect(t, in, "assist", "--agent", "bbbbbb")
	words := filepath.Join(in.Resolved.TaskDir, "words.c")
	const rel = "t1/words.c"

	// Nothing recorded yet: every line is the student's.
	checkBlame(t, blameOf(t, in, words), nil)

	a.ok("nvim_open", map[string]any{"path": rel})
	rd := a.ok("nvim_buffer_read", map[string]any{"path": rel, "start": 10, "end": 10})
	a.ok("nvim_buffer_edit", map[string]any{"path": rel, "start": 10, "end": 10, "expected_tick": num(rd["tick"]),
		"lines": []any{"    /* A: tabs and newlines too */", `    return c == ' ' || c == '\t' || c == '\n'; /* A */`}})
	b.ok("nvim_buffer_edit", map[string]any{"path": rel, "start": 1, "end": 0, "lines": []any{"/* B: reviewed */"}})

	// The student shows the file, reverts A's return line, adds a line,
	// and saves.
	st.lua(nil, `vim.api.nvim_set_current_buf(vim.fn.bufnr(...))`, words)
	edit := st.pane("edit")
	keys := func(literal string, special ...string) {
		t.Helper()
		if literal != "" {
			in.Tmux(t, "send-keys", "-t", edit, "-l", literal)
		}
		for _, k := range special {
			in.Tmux(t, "send-keys", "-t", edit, k)
		}
	}
	keys(":12", "Enter")
	keys("cc", "")
	keys("return c == ' '; // student reverted", "Escape")
	keys("G", "")
	keys("O", "")
	keys("/* student */", "Escape")
	keys(":w!", "Enter")
	waitDisk := func(what ...string) {
		t.Helper()
		waitUntil(t, 10*time.Second, "the saved file", func() bool {
			data, _ := os.ReadFile(words)
			for _, w := range what {
				if !strings.Contains(string(data), w) {
					return false
				}
			}
			return true
		})
	}
	waitDisk("/* B: reviewed */", "student reverted", "/* student */")
	first := map[string]string{
		"/* B: reviewed */":              "bbbbbb",
		"/* A: tabs and newlines too */": "aaaaaa",
		"// student reverted":            "container",
		"/* student */":                  "container",
	}
	checkBlame(t, blameOf(t, in, words), first)

	// Neovim restarts (killed, so a swap file may be left) and A edits
	// again; the student saves.
	in.KillNvim(t)
	in.StartNvim(t)
	edit = st.pane("edit")
	a.ok("nvim_open", map[string]any{"path": rel})
	a.ok("nvim_buffer_edit", map[string]any{"path": rel, "start": 3, "end": 2, "lines": []any{"/* A again */"}})
	st.lua(nil, `vim.api.nvim_set_current_buf(vim.fn.bufnr(...))`, words)
	keys(":w!", "Enter")
	waitDisk("/* A again */")
	first["/* A again */"] = "aaaaaa"
	checkBlame(t, blameOf(t, in, words), first)

	// The container is re-created (new id, new socket directory, Neovim
	// started afresh); B edits the last line, the student saves.
	in.Recreate(t, false)
	in.Select(t)
	b.ok("nvim_open", map[string]any{"path": rel})
	rd = b.ok("nvim_buffer_read", map[string]any{"path": rel, "end": 1})
	total := num(rd["total"])
	b.ok("nvim_buffer_edit", map[string]any{"path": rel, "start": total, "end": total, "lines": []any{"} /* B end */"}})
	edit = st.pane("edit")
	st.lua(nil, `vim.api.nvim_set_current_buf(vim.fn.bufnr(...))`, words)
	keys(":w!", "Enter")
	waitDisk("} /* B end */")
	first["} /* B end */"] = "bbbbbb"
	checkBlame(t, blameOf(t, in, words), first)
}

// TestEditFailsClosedWithoutRecord: an edit whose provenance cannot be
// recorded is not made; with the record possible again, the same edit is.
func TestEditFailsClosedWithoutRecord(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	a := connect(t, in, "assist", "--agent", "aaaaaa")
	const rel = "t1/words.c"
	words := filepath.Join(in.Resolved.TaskDir, "words.c")
	a.ok("nvim_open", map[string]any{"path": rel})
	before, _ := st.bufferText(words)
	// A regular file where the records directory goes.
	dir := filepath.Join(in.Dirs.State, "provenance")
	if err := os.WriteFile(dir, []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	edit := map[string]any{"path": rel, "start": 1, "end": 0, "lines": []any{"/* unrecorded */"}}
	if msg := a.refused("nvim_buffer_edit", edit); !strings.Contains(msg, "nothing was changed") || !strings.Contains(msg, "provenance") {
		t.Fatalf("edit without a record: %s", msg)
	}
	if now, _ := st.bufferText(words); now != before {
		t.Fatalf("an unrecorded edit changed the buffer:\n%s", now)
	}
	os.Remove(dir)
	a.ok("nvim_buffer_edit", edit)
	if now, _ := st.bufferText(words); !strings.HasPrefix(now, "/* unrecorded */\n") {
		t.Fatalf("control: the edit was not made:\n%s", now)
	}
}
