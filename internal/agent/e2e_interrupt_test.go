package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/sockets"
)

// interrupt runs stemctl with args and sends it SIGINT (the terminal's
// Ctrl-C) as soon as at says so, given what it has written on stderr. It
// returns that stderr, the exit code, and whether the signal was sent
// before stemctl ended on its own.
func (a *account) interrupt(at func(stderr string) bool, args ...string) (string, int, bool) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), args...)
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sent := false
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-time.After(5 * time.Millisecond):
			if !sent && at(errOut.String()) {
				cmd.Process.Signal(os.Interrupt)
				sent = true
			}
		}
	}
	code := 0
	if err != nil {
		code = -1
		if cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
	}
	return errOut.String(), code, sent
}

// saysInterrupted fails unless stemctl ended as interrupted, saying so in
// its own words rather than as a transport error.
func saysInterrupted(t *testing.T, step, stderr string, code int, sent bool) {
	t.Helper()
	if !sent {
		t.Fatalf("%s: stemctl ended before the step:\n%s", step, stderr)
	}
	if code != 130 || !strings.Contains(stderr, "stemctl: interrupted") {
		t.Errorf("%s: exit %d, want 130 and \"stemctl: interrupted\":\n%s", step, code, stderr)
	}
	if strings.Contains(stderr, "context canceled") || strings.Contains(stderr, "http://d/") {
		t.Errorf("%s: the interruption is reported as a transport error:\n%s", step, stderr)
	}
}

// agentIDs are the agent directories of the account now.
func (a *account) agentIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(a.Runtime, "stem", "agents"))
	var ids []string
	for _, e := range ents {
		if agentstore.ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// supervisors are the running `stemctl agent run` processes of the account.
func (a *account) supervisors() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cl), "\x00agent\x00run\x00--dir\x00"+filepath.Join(a.Runtime, "stem", "agents")) {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st[strings.LastIndexByte(string(st), ')'):]), ") Z") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// noAgentLeft fails if anything of an agent remains: a record, a directory,
// a supervisor, a sandbox container or socket (of the ids seen) or a window.
func (a *account) noAgentLeft(t *testing.T, step string, seen map[string]bool) {
	t.Helper()
	if sts := a.agents(); len(sts) != 0 {
		t.Errorf("%s: agent list shows %+v", step, sts)
	}
	if ids := a.agentIDs(); len(ids) != 0 {
		t.Errorf("%s: agent directories left: %v", step, ids)
	}
	if pids := a.supervisors(); len(pids) != 0 {
		t.Errorf("%s: supervisors left: %v", step, pids)
	}
	for id := range seen {
		if out, err := a.podman("container", "exists", "stem-agent-"+id); err == nil {
			t.Errorf("%s: the sandbox of agent %s is left %s", step, id, out)
		}
	}
	var st instanceInfo
	if r, err := a.run("status", nativeInst, "--json"); err == nil && r.Code == 0 && json.Unmarshal([]byte(r.Stdout), &st) == nil && st.State == "running" {
		if roles := a.tmux(st, "list-panes", "-a", "-F", "#{@stem_role}"); strings.Contains(roles, "agent") {
			t.Errorf("%s: an agent window is left:\n%s", step, roles)
		}
		for id := range seen {
			if _, err := os.Lstat(filepath.Join(st.Record.SocketDir, sockets.AgentSocket(id))); err == nil {
				t.Errorf("%s: the socket of agent %s is left", step, id)
			}
		}
	}
}

// Ctrl-C during `stemctl agent start`, at each of its steps, leaves no
// half-made agent (record, directory, supervisor, sandbox or window) and
// says it was interrupted; the next agent start works.
func TestAgentStartInterruptedAtEachStep(t *testing.T) {
	t.Parallel() // its own account; it waits mostly on Podman
	a := newAccount(t)
	seen := map[string]bool{}
	// Each step is seen from outside, as it happens.
	steps := []struct {
		name string
		at   func(stderr string) bool
	}{
		{"creating the instance", func(s string) bool { return strings.Contains(s, "\ncreating ") || strings.HasPrefix(s, "creating ") }},
		{"supervisor started", func(string) bool {
			for _, id := range a.agentIDs() {
				seen[id] = true
				if _, err := os.Stat(filepath.Join(a.Runtime, "stem", "agents", id, runspec.File)); err == nil {
					return true
				}
			}
			return false
		}},
		// The supervisor creates the sandbox as soon as it listens.
		{"supervisor listening", func(string) bool {
			for _, id := range a.agentIDs() {
				seen[id] = true
				if log, err := os.ReadFile(filepath.Join(a.Base, "state", "agents", id+".log")); err == nil && strings.Contains(string(log), ": listening on ") {
					return true
				}
			}
			return false
		}},
		{"sandbox created", func(string) bool {
			for _, id := range a.agentIDs() {
				seen[id] = true
				if _, err := a.podman("container", "exists", "stem-agent-"+id); err == nil {
					return true
				}
			}
			return false
		}},
		// A supervisor that cannot answer SIGTERM (stopped): it is
		// killed without waiting out the grace, and its sandbox and
		// socket removed for it.
		{"sandbox created, supervisor stuck", func(string) bool {
			for _, id := range a.agentIDs() {
				seen[id] = true
				if _, err := a.podman("container", "exists", "stem-agent-"+id); err == nil {
					for _, pid := range a.supervisors() {
						syscall.Kill(pid, syscall.SIGSTOP)
						t.Cleanup(func() {
							if slices.Contains(a.supervisors(), pid) {
								syscall.Kill(pid, syscall.SIGKILL)
							}
						})
					}
					return true
				}
			}
			return false
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			stderr, code, sent := a.interrupt(s.at, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
			// On a loaded machine the step can be seen only as stemctl
			// finishes: the Ctrl-C then comes after its work, which
			// tests nothing. Stop what it started and try again.
			for try := 0; sent && code == 0 && try < 5; try++ {
				t.Logf("%s: stemctl finished before the Ctrl-C reached it; again", s.name)
				for _, pid := range a.supervisors() {
					syscall.Kill(pid, syscall.SIGCONT)
				}
				for _, id := range a.agentIDs() {
					a.must("agent", "stop", id)
				}
				stderr, code, sent = a.interrupt(s.at, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
			}
			saysInterrupted(t, s.name, stderr, code, sent)
			a.noAgentLeft(t, s.name, seen)
			var rec agentstore.Record
			a.mustJSON(&rec, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
			a.waitReport(rec.ID, 30*time.Second)
			a.must("agent", "stop", rec.ID)
			a.noAgentLeft(t, s.name+", then started and stopped", map[string]bool{rec.ID: true})
		})
	}
}

// Ctrl-C during `stemctl rm`: while it stops the instance's agents, the
// agents are stopped and the instance is left whole; while it removes the
// instance, the instance goes entirely. Either way stemctl says it was
// interrupted, and the next command works.
func TestRmInterruptedAtEachStep(t *testing.T) {
	t.Parallel() // its own account and model
	a := newAccount(t)
	var rec agentstore.Record
	a.mustJSON(&rec, "agent", "start", "custom", "native-amd64", "demo", "hello", "1", "--background")
	a.waitReport(rec.ID, 30*time.Second)
	st := a.status(nativeInst)

	step := "stopping its agent"
	stderr, code, sent := a.interrupt(func(s string) bool { return strings.Contains(s, ": stopping agent "+rec.ID) }, "rm", nativeInst)
	saysInterrupted(t, step, stderr, code, sent)
	a.noAgentLeft(t, step, map[string]bool{rec.ID: true})
	if after := a.status(nativeInst); after.State != "running" || !after.Tmux || after.Record.ContainerID != st.Record.ContainerID {
		t.Fatalf("%s: the instance was not left whole: %+v", step, after)
	}

	step = "removing the instance"
	stderr, code, sent = a.interrupt(func(s string) bool { return strings.Contains(s, nativeInst+": removing") }, "rm", nativeInst)
	saysInterrupted(t, step, stderr, code, sent)
	if out := a.must("list", "--json"); strings.Contains(out, nativeInst) {
		t.Errorf("%s: list still shows the instance:\n%s", step, out)
	}
	if out, err := a.podman("container", "exists", st.Record.ContainerID); err == nil {
		t.Errorf("%s: its container is left %s", step, out)
	}
	if _, err := os.Stat(st.Record.SocketDir); err == nil {
		t.Errorf("%s: its socket directory %s is left", step, st.Record.SocketDir)
	}
	a.must("up", "native-amd64", "demo", "hello", "1")
	if after := a.status(nativeInst); after.State != "running" || after.Record.ContainerID == st.Record.ContainerID {
		t.Fatalf("up after the interrupted rm: %+v", after)
	}
	a.must("rm", nativeInst)
}
