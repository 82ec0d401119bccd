package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmdDoctor(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--json"})
	if err := cmd.Execute(); err != nil || got == nil || !got.JSON {
		t.Fatalf("err %v, options %+v", err, got)
	}
	cmd = NewCmdDoctor(&cmdutil.Factory{IOStreams: ios}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"extra"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil {
		t.Fatal("an argument was accepted")
	}
}

// brokenEnv is an account where nothing is installed and stem-mcp's
// error carries terminal escapes (a path a card could name).
func brokenEnv(t *testing.T) *doctor.Env {
	dir := t.TempDir()
	return &doctor.Env{
		User: "stu", UID: 4321, GID: 4321, Home: dir, Runtime: dir + "/run", Workspace: dir + "/ws",
		SubIDs:   idmap.Files{SubUID: dir + "/subuid", SubGID: dir + "/subgid"},
		LookPath: func(string) (string, error) { return "", errors.New("not found") },
		Output:   func(context.Context, string, ...string) (string, error) { return "", errors.New("no") },
		Connect: func(context.Context) (doctor.Engine, doctor.Service, error) {
			return nil, doctor.Service{}, errors.New("unreachable")
		},
		MCP:    func() (string, error) { return "", errors.New("stem-mcp at /x\x1b]0;pwned\x07: missing") },
		Images: Images(),
	}
}

func run(t *testing.T, json bool, env *doctor.Env) (string, error) {
	ios, _, out, _ := iostreams.Test()
	err := Run(context.Background(), &Options{F: &cmdutil.Factory{IOStreams: ios}, JSON: json,
		Env: func(context.Context) (*doctor.Env, error) { return env, nil }})
	return out.String(), err
}

func TestTable(t *testing.T) {
	out, err := run(t, false, brokenEnv(t))
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("err %v, want exit 1", err)
	}
	for _, want := range []string{"✗  podman ", "fix: (as root) apt-get install podman", "✗  subordinate-ids", "usermod --add-subuids 100000-165535", "✗  image native-amd64", "stu: stemctl up will not work until these are fixed: podman, podman-service"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) {
		t.Errorf("a detail's terminal escape reached the table: %q", out)
	}
	// Control: the escape was in the detail the check returned.
	if r := doctor.Run(context.Background(), brokenEnv(t)); !strings.Contains(r[len(r)-2].Detail, "\x1b]0;pwned") {
		t.Fatalf("the control lacks the escape: %+v", r[len(r)-2])
	}
}

func TestJSON(t *testing.T) {
	out, err := run(t, true, brokenEnv(t))
	if err == nil {
		t.Fatal("a failing account exited 0")
	}
	var rep Report
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.OK || rep.User != "stu" || len(rep.Checks) < 15 {
		t.Fatalf("%+v", rep)
	}
	for _, c := range rep.Checks {
		if c.Status == doctor.Fail && c.Fix == "" {
			t.Errorf("%s fails without a fix", c.Name)
		}
	}
}
