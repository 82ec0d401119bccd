package class

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/xdg"
)

type env struct {
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
	home, cfg   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	home := t.TempDir()
	ios, _, out, errOut := iostreams.Test()
	e := &env{out: out, errOut: errOut, home: home, cfg: filepath.Join(home, ".config", "stem")}
	e.f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return map[string]string{"HOME": home}[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: home, Config: e.cfg}, nil },
		Self:      func() (string, error) { return filepath.Join(home, "stemctl"), nil },
	}
	return e
}

func (e *env) run(t *testing.T, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	cmd := NewCmdClass(e.f)
	cmd.SetArgs(args)
	cmd.SetOut(e.out)
	cmd.SetErr(e.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func (e *env) must(t *testing.T, args ...string) string {
	t.Helper()
	if err := e.run(t, args...); err != nil {
		t.Fatalf("class %v: %v\n%s", args, err, e.errOut)
	}
	return e.out.String()
}

func TestRosterCommands(t *testing.T) {
	e := newEnv(t)
	e.must(t, "init", "lab3", "--key", "/k/stem_kowalski", "--ssh-option", "UserKnownHostsFile=/k/kh")
	e.must(t, "add", "lab3", "anna@lab-03")
	e.must(t, "add", "lab3", "anna@lab-server", "--port", "2222", "--as", "anna.k", "--key", "rel/key")
	if err := e.run(t, "add", "lab3", "anna@lab-04"); err == nil || !strings.Contains(err.Error(), "already has a student anna") {
		t.Fatalf("duplicate: %v", err)
	}
	if err := e.run(t, "add", "lab3", "lab-04"); err == nil || !cmdutil.IsFlagError(err) {
		t.Fatalf("no user: %v", err)
	}
	csv := filepath.Join(e.home, "more.csv")
	os.WriteFile(csv, []byte("name,host,port\nbob,bob@lab-04,\ncyd,cyd@lab-05,2200\n"), 0o600)
	if out := e.must(t, "import", "lab3", csv); !strings.Contains(out, "imported 2 students into class lab3: 4 students") {
		t.Fatal(out)
	}
	out := e.must(t, "list", "lab3", "--json")
	var r class.Roster
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Students) != 4 || r.Key != "/k/stem_kowalski" {
		t.Fatalf("%v %s", err, out)
	}
	if k := r.Students[1].Key; r.Students[1].Name != "anna.k" || !filepath.IsAbs(k) || !strings.HasSuffix(k, "rel/key") {
		t.Fatalf("--key not made absolute: %+v", r.Students[1])
	}
	out = e.must(t, "list")
	if !strings.Contains(out, "lab3") || !strings.Contains(out, " 4 ") {
		t.Fatal(out)
	}
	out = e.must(t, "list", "lab3")
	if !strings.Contains(out, "anna.k   anna@lab-server:2222") || !strings.Contains(out, "UserKnownHostsFile=/k/kh") {
		t.Fatal(out)
	}
	if err := e.run(t, "rm", "lab3"); err == nil || !strings.Contains(err.Error(), "still has 4 students") {
		t.Fatalf("rm class with students: %v", err)
	}
	e.must(t, "rm", "lab3", "bob")
	e.must(t, "rm", "lab3", "--force")
	if out := e.must(t, "list"); !strings.Contains(out, "no classes") {
		t.Fatal(out)
	}
}

func TestStatusFlags(t *testing.T) {
	e := newEnv(t)
	var got *StatusOptions
	cmd := NewCmdStatus(e.f, func(_ context.Context, o *StatusOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"lab3", "--watch", "--every", "2s", "--timeout", "3s", "--parallel", "8"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Class != "lab3" || !got.Watch || got.Every != 2*time.Second || got.Timeout != 3*time.Second || got.Parallel != 8 {
		t.Fatalf("%+v", got)
	}
	if err := RunStatus(context.Background(), &StatusOptions{F: e.f, Watch: true, JSON: true, Every: time.Second}); err == nil || !cmdutil.IsFlagError(err) {
		t.Fatalf("--watch --json: %v", err)
	}
	if err := RunStatus(context.Background(), &StatusOptions{F: e.f, Every: time.Second}); err == nil || !strings.Contains(err.Error(), "no class yet") {
		t.Fatalf("no class: %v", err)
	}
	e.must(t, "init", "lab3")
	if err := RunStatus(context.Background(), &StatusOptions{F: e.f, Every: time.Second}); err == nil || !strings.Contains(err.Error(), "has no students") {
		t.Fatalf("empty class: %v", err)
	}
}

func TestRender(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	two, zero := 2, 0
	rows := []class.Row{
		{Student: "anna", Dest: "anna@lab-03", Reach: class.ReachOK, Level: "observe", Flags: []class.Flag{class.FlagInstanceDown, class.FlagFailing},
			Work: &class.Work{LastBuild: &class.Outcome{Type: "build_failed", Action: "build", ExitCode: &two, Time: *at(3 * time.Minute)},
				LastEvent: &class.Outcome{Type: "program_crashed", Signal: "SIGSEGV", Time: *at(40 * time.Second)}},
			Instances: []class.Instance{
				{Instance: "native-amd64-demo-hello-t1", Profile: "native-amd64", Series: "demo", Card: "hello", Task: "1", State: "down"},
				{Instance: "hazard3-sim-inf-bss-t4", State: "answers", Activity: at(125 * time.Minute),
					Agents: []class.Agent{{Provider: "claude", Level: "assist"}, {Provider: "codex", Level: "observe", Problem: "ending"}}},
			}},
		{Student: "bob", Dest: "bob@lab-04:2222", Reach: class.ReachTimeout, Flags: []class.Flag{class.FlagUnreachable},
			Why: "no answer within 15s", Fix: "is the student's machine overloaded or asleep?", Instances: []class.Instance{}},
		{Student: "cyd", Dest: "cyd@lab-05", Reach: class.ReachOK, Level: "assist", Flags: []class.Flag{},
			Work:      &class.Work{LastBuild: &class.Outcome{Type: "program_exited", Action: "test", ExitCode: &zero, Time: *at(5 * time.Second)}},
			Instances: []class.Instance{{Instance: "native-amd64-demo-hello-t1", State: "answers", Activity: at(0)}}},
	}
	var b bytes.Buffer
	render(&b, rows, now)
	want := `STUDENT  HOST             REACH    LEVEL    TASK                        PROFILE       STATE    IDLE   AGENTS                        LAST BUILD           LAST EVENT               FLAGS
anna     anna@lab-03      ok       observe  demo/hello/1                native-amd64  down     -      -                             build failed 3m ago  crashed SIGSEGV 40s ago  instance-down,failing
anna                                        hazard3-sim-inf-bss-t4      -             answers  2h05m  claude/assist,codex/observe!                                                
bob      bob@lab-04:2222  timeout  -        -                           -             -        -      -                             -                    -                        unreachable
cyd      cyd@lab-05       ok       assist   native-amd64-demo-hello-t1  -             answers  0s     -                             test ok 5s ago       -                        -
bob: no answer within 15s
  is the student's machine overloaded or asleep?
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A student with 64 instances whose task names copy another student's row
// gets at most maxTableInstances lines, each starting with their own name;
// without the cap and the name, 64 lines would look like bob's.
func TestRenderCraftedTasks(t *testing.T) {
	var ins []class.Instance
	for range 64 {
		ins = append(ins, class.Instance{Instance: "bob      bob@lab-04       ok       assist   demo/hello/1", State: "answers"})
	}
	rows := []class.Row{{Student: "mallory", Dest: "mallory@lab-09", Reach: class.ReachOK, Level: "observe", Instances: ins}}
	var b bytes.Buffer
	render(&b, rows, time.Now())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 1+maxTableInstances+1 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "mallory ") {
			t.Fatalf("a line of mallory's that does not start with mallory: %q", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "(56 more instances: --json lists them)") {
		t.Fatalf("last line: %q", lines[len(lines)-1])
	}
}

// A roster cut short is reported with its file, line and repair, and the
// other classes are listed still; the class alone is refused.
func TestListWithADamagedRoster(t *testing.T) {
	e := newEnv(t)
	e.must(t, "init", "lab3")
	e.must(t, "add", "lab3", "anna@lab-03")
	e.must(t, "init", "lab4")
	path := class.Path(e.cfg, "lab4")
	if err := os.WriteFile(path, []byte("[student.bob]\nhost = \"bob@la"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := e.run(t, "list")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("list with a damaged roster: %v", err)
	}
	if !strings.Contains(e.out.String(), "lab3") || strings.Contains(e.out.String(), "lab4") {
		t.Errorf("the intact class is not listed alone:\n%s", e.out)
	}
	for _, want := range []string{path + " line 2:", "cut short", "complete the line or remove it"} {
		if !strings.Contains(e.errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, e.errOut)
		}
	}
	if err := e.run(t, "list", "--json"); !errors.As(err, &ee) || !strings.Contains(e.out.String(), `"lab3"`) {
		t.Errorf("list --json: %v\n%s", err, e.out)
	}
	if err := e.run(t, "list", "lab4"); err == nil || !strings.Contains(err.Error(), path+" line 2:") {
		t.Errorf("list lab4: %v", err)
	}
	e.must(t, "list", "lab3")
}
