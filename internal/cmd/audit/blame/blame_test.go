package blame_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmd/audit/blame"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/provenance"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

type env struct {
	ws          *workspace.Workspace
	card, state string
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
}

// newEnv makes a workspace with the card inf/bss and a state directory.
func newEnv(t testing.TB) *env {
	t.Helper()
	root := t.TempDir()
	card := filepath.Join(root, "ws", "inf", "bss")
	if err := os.MkdirAll(filepath.Join(card, "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(card, workspace.ManifestName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(filepath.Join(root, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ws: ws, card: filepath.Join(ws.Root, "inf", "bss"), state: filepath.Join(root, "state")}
	ios, _, out, errOut := iostreams.Test()
	e.out, e.errOut = out, errOut
	e.f = &cmdutil.Factory{IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{State: e.state}, nil },
		Workspace: func() (*workspace.Workspace, error) { return ws, nil }}
	return e
}

func (e *env) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(e.card, rel)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// agent records an agent's change to rel.
func (e *env) agent(t testing.TB, rel string, before []string, h provenance.Hunk) []string {
	t.Helper()
	_, err := provenance.Open(e.state).Record(context.Background(), provenance.Change{Card: e.card, Path: rel,
		Who: provenance.Who{Account: "alice", Agent: "3f9a1c", Level: "assist"}, Tool: "nvim_buffer_edit", Before: before, Hunks: []provenance.Hunk{h}})
	if err != nil {
		t.Fatal(err)
	}
	return provenance.Apply(before, []provenance.Hunk{h})
}

func (e *env) run(t testing.TB, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	cmd := blame.NewCmdBlame(e.f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(e.out)
	cmd.SetErr(e.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func TestBlameCommand(t *testing.T) {
	e := newEnv(t)
	text := e.agent(t, "t1/main.c", []string{"int main(void) {", "}"}, provenance.Hunk{Start: 2, End: 1, Lines: []string{"    return 0;"}})
	p := e.write(t, "t1/main.c", strings.Join(text, "\n")+"\n")
	if err := e.run(t, p); err != nil {
		t.Fatal(err)
	}
	out := e.out.String()
	for _, want := range []string{"1  container ", "2  agent 3f9a1c (assist)  ", "    return 0;", "container: 2 lines", "agent 3f9a1c (assist): 1 line"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The student moves the agent's line down: it is theirs, marked as the
	// same text as the agent's.
	e.agent(t, "t1/moved.c", []string{"int main(void) {", "}"}, provenance.Hunk{Start: 2, End: 1, Lines: []string{"    return 0; /* moved */"}})
	if err := e.run(t, e.write(t, "t1/moved.c", "int main(void) {\n}\n    return 0; /* moved */\n")); err != nil {
		t.Fatal(err)
	}
	if out := e.out.String(); !strings.Contains(out, "3  container *  ") || !strings.Contains(out, "1 container line has the same text") {
		t.Errorf("moved line:\n%s", out)
	}
	// Relative to the current directory (the card's task directory).
	t.Chdir(filepath.Join(e.card, "t1"))
	if err := e.run(t, "main.c", "--json"); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		File  string `json:"file"`
		Lines []struct {
			By  string `json:"by"`
			Who *struct {
				Agent string `json:"agent"`
			} `json:"who"`
		} `json:"lines"`
		Problems []any `json:"problems"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.File != "t1/main.c" || len(rep.Lines) != 3 || rep.Lines[1].By != "agent" || rep.Lines[1].Who.Agent != "3f9a1c" || rep.Lines[0].By != "container" || rep.Problems == nil {
		t.Fatalf("json: %s", e.out)
	}
}

func TestBlameErrors(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(t.TempDir(), "x.c")
	os.WriteFile(outside, []byte("x\n"), 0o644)
	if err := e.run(t, outside); err == nil || !strings.Contains(err.Error(), "not inside a card") || !cmdutil.IsFlagError(err) {
		t.Errorf("outside a card: %v", err)
	}
	if err := e.run(t, filepath.Join(e.card, "t1", "gone.c")); err == nil || !strings.Contains(err.Error(), "does not exist in the card") {
		t.Errorf("missing file: %v", err)
	}
	if err := e.run(t); err == nil || !strings.Contains(err.Error(), "FILE") {
		t.Errorf("no argument: %v", err)
	}
	// A file never changed through stem: every line is the student's, said
	// so, and not an error.
	p := e.write(t, "t1/mine.c", "a\nb\n")
	if err := e.run(t, p); err != nil || !strings.Contains(e.out.String(), "no change by an agent or teacher is recorded") {
		t.Errorf("no records: %v\n%s", err, e.out)
	}
}

// TestBlameHostileFile: the file is the container's. Its text reaches the
// terminal without escape sequences and without starting lines of its
// own; a symlink in the card is not followed out of it.
func TestBlameHostileFile(t *testing.T) {
	e := newEnv(t)
	p := e.write(t, "t1/evil.c", "ok\n\x1b]0;pwned\x07\x1b[2Jtitle\nfake\rline 9  agent x (full)\n\xff\xfe\n")
	if err := e.run(t, p); err != nil {
		t.Fatal(err)
	}
	out := e.out.String()
	if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "pwned") {
		t.Fatalf("escape sequences reached the terminal: %q", out)
	}
	body := out[:strings.Index(out, "\n\n")]
	if n := strings.Count(body, "\n"); n != 3 {
		t.Fatalf("%d output lines for 4 file lines:\n%s", n+1, out)
	}

	// A symlink inside the card pointing out of it: a canary file outside.
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "secret.c")
	os.WriteFile(canary, []byte("CANARY\n"), 0o600)
	if err := os.Symlink(canaryDir, filepath.Join(e.card, "t1", "link")); err != nil {
		t.Fatal(err)
	}
	err := e.run(t, filepath.Join(e.card, "t1", "link", "secret.c"))
	if err == nil || strings.Contains(e.out.String(), "CANARY") {
		t.Fatalf("read through a symlink in the card: %v\n%s", err, e.out)
	}
	// Control: the canary reads fine when it is in the card.
	e.write(t, "t1/secret.c", "CANARY\n")
	if err := e.run(t, filepath.Join(e.card, "t1", "secret.c")); err != nil || !strings.Contains(e.out.String(), "CANARY") {
		t.Fatalf("control: %v\n%s", err, e.out)
	}
}

// TestBlameProblemsReported: a broken record file is reported on stderr
// and in --json, and blame goes on with what it can use.
func TestBlameProblemsReported(t *testing.T) {
	e := newEnv(t)
	text := e.agent(t, "t1/m.c", []string{"a"}, provenance.Hunk{Start: 2, End: 1, Lines: []string{"b"}})
	p := e.write(t, "t1/m.c", strings.Join(text, "\n")+"\n")
	f := provenance.Open(e.state).File(e.card, "t1/m.c")
	data, _ := os.ReadFile(f)
	os.WriteFile(f, append([]byte("{\"garbage\n"), data...), 0o600)
	if err := e.run(t, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.errOut.String(), "warning: line 1 of the records") || !strings.Contains(e.out.String(), "agent 3f9a1c") {
		t.Fatalf("stderr %q stdout %q", e.errOut, e.out)
	}
}

// BenchmarkBlameCommand is `stemctl audit blame` (less process start) of
// a 1,000-line file with 200 recorded changes.
func BenchmarkBlameCommand(b *testing.B) {
	e := newEnv(b)
	text := make([]string, 1000)
	for i := range text {
		text[i] = fmt.Sprintf("    line %d;", i)
	}
	for c := 0; c < 200; c++ {
		at := 1 + (c*37)%len(text)
		text = e.agent(b, "t1/big.c", text, provenance.Hunk{Start: at, End: at, Lines: []string{fmt.Sprintf("    agent %d;", c)}})
		text[(c*53)%len(text)] = fmt.Sprintf("    student %d;", c)
	}
	p := e.write(b, "t1/big.c", strings.Join(text, "\n")+"\n")
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := e.run(b, p); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	if !strings.Contains(e.out.String(), "agent 3f9a1c (assist): ") {
		b.Fatalf("no agent line:\n%s", e.out)
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}
