package e2e_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runIn runs the account's stemctl in dir, as a student in a task's
// directory of the card does.
func (a *account) runIn(dir string, args ...string) result {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{Stdout: o.String(), Stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatalf("stemctl %v in %s: %v", args, dir, err)
	}
	return r
}

// Every per-instance command run without a name in a task's directory of
// the card works on that task's instance; outside every card the same
// command line names what to give instead and does nothing.
func TestPerInstanceCommandsInferTheInstance(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	task := filepath.Join(a.WS, "demo", "hello", "t1")
	outside := a.Base
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status"}, 0, "instance   " + inst},
		{[]string{"policy", "--json"}, 0, `"instance": "` + inst + `"`},
		{[]string{"allow"}, 0, inst + ": agents may type into no pane"},
		{[]string{"exec", "--tty", "never", "--", "pwd"}, 0, "/demo/hello/t1"},
		{[]string{"test", "--print"}, 0, "make test"},
		{[]string{"mcp", "select"}, 0, "selected " + inst},
		{[]string{"proposals"}, 0, "no pending proposals"},
	} {
		r := a.runIn(task, c.args...)
		if r.Code != c.code || !strings.Contains(r.Stdout, c.want) {
			t.Errorf("%v in the task's directory: exit %d, want %d and %q\nstdout: %s\nstderr: %s", c.args, r.Code, c.code, c.want, r.Stdout, r.Stderr)
		}
		if c.args[0] == "proposals" {
			continue // lists every instance's anywhere
		}
		r = a.runIn(outside, c.args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "not in the card of any instance") {
			t.Errorf("%v outside every card: exit %d\nstdout: %s\nstderr: %s", c.args, r.Code, r.Stdout, r.Stderr)
		}
	}
	// An agent: the account has no API key, so stem's key check (made
	// once the instance is found, before any window opens) answers.
	for _, args := range [][]string{{"agent", "start", "claude", "--background"}, {"agent", "attach", "claude", "--background"}} {
		if r := a.runIn(task, args...); r.Code == 0 || !strings.Contains(r.Stderr, "needs an API key") {
			t.Errorf("%v in the task's directory: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		if r := a.runIn(outside, args...); r.Code == 0 || !strings.Contains(r.Stderr, "not in the card of any instance") {
			t.Errorf("%v outside every card: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	// A pane id alone is the pane, not an instance's name.
	pane := strings.TrimSpace(a.tmuxOut(filepath.Join(a.statusDir(t, inst), "t.sock"), "display-message", "-p", "-t", "stem:0", "#{pane_id}"))
	if r := a.runIn(task, "allow", pane); r.Code != 0 || !strings.Contains(r.Stdout, inst+": ") {
		t.Errorf("allow %s: exit %d\n%s%s", pane, r.Code, r.Stdout, r.Stderr)
	}
	if r := a.runIn(task, "disallow", pane); r.Code != 0 {
		t.Errorf("disallow %s: exit %d\n%s%s", pane, r.Code, r.Stdout, r.Stderr)
	}
	// down last: outside the card it stops nothing, in the task it stops
	// the task's instance.
	if r := a.runIn(outside, "down"); r.Code == 0 {
		t.Fatalf("down outside every card: %s", r.Stdout)
	}
	if r := a.must(0, "list", "--json"); !strings.Contains(r.Stdout, `"state": "running"`) {
		t.Fatalf("down outside every card stopped the instance: %s", r.Stdout)
	}
	if r := a.runIn(task, "down"); r.Code != 0 || !strings.Contains(r.Stdout, inst+": stopped") {
		t.Fatalf("down in the task's directory: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
