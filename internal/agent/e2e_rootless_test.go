package agent_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
	"github.com/stem-edu/stem/internal/testenv/student"
)

// The agent sandbox of a student without root (testenv/student): its own
// rootless Podman, its images in its own storage, the sandbox in a user
// namespace of the student's subordinate ids (the CLI runs as AgentUID
// there, not root and not the student, with no capability), its sockets
// under the student's runtime directory.

const nativeImage = "localhost/stem-native-amd64:latest"

// newStudentBoxAccount is a boxAccount of a non-root student.
func newStudentBoxAccount(t testing.TB, script ...modelserver.Step) (*boxAccount, *student.Student) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real containers as a rootless student (skipped with -short)")
	}
	bin := bins(t)
	s := student.Get(t, nativeImage, sandbox.Image)
	a := &account{Account: s.Account(t, bin), t: t}
	b := withModel(t, a, script...)
	// Written by root (the test); the student's stemctl reads it.
	if err := os.Lchown(filepath.Join(a.Base, "config", agentcli.ConfigFile), s.UID, s.GID); err != nil {
		t.Fatal(err)
	}
	return b, s
}

// cliStatus is /proc/PID/status of the agent CLI's process in the
// sandbox (the node process that names itself after the CLI).
func (b *boxAccount) cliStatus(rec agentstore.Record) string {
	b.t.Helper()
	out, err := b.podman("exec", rec.Sandbox, "bash", "-c",
		fmt.Sprintf(`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = %q ] && cat $p/status && exit 0; done; exit 1`, rec.Adapter))
	if err != nil {
		b.t.Fatalf("the CLI's process in the sandbox: %v %s", err, out)
	}
	return out
}

func TestRootlessSandboxedClaude(t *testing.T) {
	t.Parallel() // its own account and model
	b, s := newStudentBoxAccount(t, modelserver.Call("pane_list", nil), modelserver.Say("stem-rootless-done"))
	b.must("up", "native-amd64", "demo", "hello", "1")
	st := b.status(nativeInst)
	if !strings.HasPrefix(st.Record.SocketDir, s.Runtime+"/") {
		t.Fatalf("socket directory %s is not under the student's runtime directory %s", st.Record.SocketDir, s.Runtime)
	}
	// The attacks of issue 21, from inside the student's container: the
	// CLIs' project settings, hooks, MCP configuration and instruction
	// files planted in the card, each set to make the canary.
	planted := filepath.Join(b.Base, "CANARY-rootless-planted")
	b.plantAll(planted)

	rec := b.start("claude", "--level", "full")
	if !strings.HasPrefix(rec.Dir, s.Runtime+"/") {
		t.Errorf("agent directory %s is not under the student's runtime directory", rec.Dir)
	}
	// The real CLI's tool call reaches stem and comes back.
	b.prompt(st, rec, "list the panes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := b.ms.WaitResult(ctx, 0)
	if err != nil {
		t.Fatalf("no result of pane_list came back: %v\nwindow:\n%s\nlog:\n%s", err, b.capture(st, rec.Pane), readFile(rec.Log))
	}
	if !strings.Contains(res.Content, "edit") || !strings.Contains(res.Content, rec.Provider) {
		t.Errorf("pane_list result from the rootless sandbox: %s", res.Content)
	}
	b.waitPane(st, rec.Pane, "stem-rootless-done", 30*time.Second)

	// The CLI runs as AgentUID (not root in the sandbox, not the student
	// on the host), with nothing to gain: no capability, no-new-privileges.
	status := b.cliStatus(rec)
	u := sandbox.AgentUID
	for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", u, u, u, u), "NoNewPrivs:\t1",
		"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"} {
		if !strings.Contains(status, want) {
			t.Errorf("the CLI's process lacks %q:\n%s", want, status)
		}
	}

	b.fullSandboxRepo(st.Record.CardPath, rec, s)

	// Keys typed into the agent's window from inside the container: the
	// CLI's shell escape runs in the sandbox, not on the host, and cannot
	// write the image.
	escaped := filepath.Join(b.Base, "CANARY-rootless-escape")
	in := func(args ...string) {
		t.Helper()
		if r, err := b.run(append([]string{"exec", nativeInst, "--", "tmux", "-S", filepath.Join(st.Record.SocketDir, "t.sock"), "send-keys", "-t", rec.Pane}, args...)...); err != nil || r.Code != 0 {
			t.Fatalf("send-keys from the container: %v %+v", err, r)
		}
	}
	before := b.capture(st, rec.Pane)
	in("-l", "!")
	b.waitPaneChange(st, rec.Pane, before)
	in("-l", "touch /tmp/escaped "+escaped+"; touch /usr/local/escaped")
	b.waitPane(st, rec.Pane, "escaped", 10*time.Second)
	in("Enter")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := b.podman("exec", rec.Sandbox, "test", "-e", "/tmp/escaped"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the typed escape never ran in the sandbox; the window shows:\n%s", b.capture(st, rec.Pane))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := b.podman("exec", rec.Sandbox, "test", "-e", "/usr/local/escaped"); err == nil {
		t.Errorf("the typed escape wrote the sandbox's image: %s", out)
	}
	if r, err := b.run("agent", "stop", rec.ID); err != nil || r.Code != 0 {
		t.Fatalf("agent stop: %v %+v\nlog:\n%s", err, r, readFile(rec.Log))
	}
	for _, c := range []string{planted, escaped} {
		if _, err := os.Stat(c); err == nil {
			t.Errorf("an attack from the rootless student's container reached the host: %s exists", c)
		}
	}
	// Control: the same planted files, run the way stem ran the CLI
	// before the sandbox (on the host, in the card), make the canary.
	b.hostRunOld(t, "claude", st.Record.CardPath)
	if _, err := os.Stat(planted); err != nil {
		t.Fatalf("control: claude on the host in the card did not run the planted files; the test proves nothing")
	}
}

// fullSandboxRepo: at full the sandbox writes the card (through its ACL),
// and what it writes is neither the student's nor runnable by git on the
// host: a repository with a hook the sandbox makes in a task directory is
// refused there ("dubious ownership", the canary stays away), while the
// student can still edit the sandbox's files. Control: the same
// repository given to the student runs its hook.
func (b *boxAccount) fullSandboxRepo(card string, rec agentstore.Record, s *student.Student) {
	t := b.t
	canary := filepath.Join(b.Base, "CANARY-rootless-full-repo")
	hook := "#!/bin/sh\necho ran >> " + canary + "\n"
	script := fmt.Sprintf(`set -e; cd %q; echo 'int sandbox;' > t1-sandbox.c; git init -q t1/repo
printf '%%b' %q > t1/repo/.git/hooks/pre-commit; chmod +x t1/repo/.git/hooks/pre-commit`, card, hook)
	if out, err := b.podman("exec", rec.Sandbox, "sh", "-c", script); err != nil {
		t.Fatalf("the sandbox at full could not write the card: %v\n%s", err, out)
	}
	var fst syscall.Stat_t
	if err := syscall.Stat(filepath.Join(card, "t1/repo/.git"), &fst); err != nil || int(fst.Uid) == s.UID {
		t.Errorf("the sandbox's repository belongs to uid %d (the student is %d): %v", fst.Uid, s.UID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	edit := b.Command(ctx, "sh", "-c", "echo '// student' >> t1-sandbox.c && git -C t1/repo commit -q --allow-empty -m x")
	edit.Dir = card
	out, err := edit.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "dubious ownership") {
		t.Errorf("the student's edit and git in the sandbox's repository: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(card, "t1-sandbox.c")); err != nil || !strings.Contains(string(data), "// student") {
		t.Errorf("the student could not edit the sandbox's file: %v %q", err, data)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("git on the host ran the hook the sandbox planted")
	}
	filepath.WalkDir(filepath.Join(card, "t1/repo"), func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			err = os.Lchown(p, s.UID, s.GID)
		}
		return err
	})
	ctl := b.Command(ctx, "git", "-C", "t1/repo", "commit", "-q", "--allow-empty", "-m", "x")
	ctl.Dir = card
	ctl.Run()
	if _, err := os.Stat(canary); err != nil {
		t.Error("control: the repository given to the student ran no hook (the route is not live)")
	}
	os.RemoveAll(filepath.Join(card, "t1/repo"))
	os.Remove(filepath.Join(card, "t1-sandbox.c"))
}
