package gate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/cmd/audit/blame"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// TestTeacherEditIsBlamedOnTheGrant: a teacher's agent edits the
// student's buffer over SSH; once the student saves, audit blame names
// the teacher and the grant for that line and the student for the rest.
func TestTeacherEditIsBlamedOnTheGrant(t *testing.T) {
	s := newStudent(t)
	key, g := s.grant(t, "kowalska", "assist", "--instance", s.inst.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, _, err := s.mcpClient(t, ctx, key.Private, "mcp", s.inst.Name)
	if err != nil {
		t.Fatalf("initialize over ssh: %v\nsshd log:\n%s", err, s.srv.Log())
	}
	defer c.Close()
	call := func(name string, args map[string]any) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
	}
	call("nvim_open", map[string]any{"path": "t1/words.c"})
	call("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 0, "lines": []any{"/* reviewed by the teacher */"}})

	// The student shows the file the teacher's agent loaded and saves it,
	// with keys typed into Neovim (its directory is the task's).
	words := filepath.Join(s.inst.Resolved.TaskDir, "words.c")
	edit := strings.TrimSpace(s.inst.Tmux(t, "list-panes", "-t", "stem:edit", "-F", "#{pane_id}"))
	for _, keys := range []string{":buffer words.c", ":w!"} {
		s.inst.Tmux(t, "send-keys", "-t", edit, "-l", keys)
		s.inst.Tmux(t, "send-keys", "-t", edit, "Enter")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(words)
		if strings.HasPrefix(string(data), "/* reviewed by the teacher */\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the student's save did not reach the disk:\n%s", data)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ios, _, out, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return s.inst.Dirs, nil },
		Workspace: func() (*workspace.Workspace, error) { return workspace.Open(s.inst.Resolved.Workspace) }}
	if err := blame.Run(ctx, &blame.Options{F: f, File: words, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Summary struct {
			ByWriter map[string]int `json:"by_writer"`
		} `json:"summary"`
		Lines []struct {
			By  string `json:"by"`
			Who *struct {
				Account string `json:"account"`
				Grant   string `json:"grant"`
				KeyFP   string `json:"key_fingerprint"`
				Level   string `json:"level"`
			} `json:"who"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Lines) < 2 {
		t.Fatalf("%v\n%s", err, out)
	}
	if w := rep.Lines[0].Who; rep.Lines[0].By != "teacher" || w == nil || w.Grant != g.Label() || w.Level != "assist" || w.KeyFP == "" {
		t.Fatalf("line 1: %s", out)
	}
	if label := "teacher kowalska, grant " + g.Label() + " (assist)"; rep.Summary.ByWriter[label] != 1 {
		t.Fatalf("no line by %q: %s", label, out)
	}
	for i, l := range rep.Lines[1:] {
		if l.By != "container" {
			t.Fatalf("line %d: %s", i+2, out)
		}
	}
}
