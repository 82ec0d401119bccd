package e2e_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenerPID is the pid of the process listening on a unix socket.
func listenerPID(t *testing.T, path string) int {
	t.Helper()
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.(*net.UnixConn).SyscallConn()
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil {
		t.Fatal(err)
	}
	return int(cred.Pid)
}

// A re-creation that the OCI runtime refuses leaves the student's instance
// as it was: the old container runs again and answers on its sockets, and
// the record, the selection, the socket directory and the card state are
// unchanged. The refusal is a real one: a Podman service stemctl starts
// itself from a shell without the CONTAINERS_CONF this host needs (on a
// host that needs none, the re-creation simply succeeds).
func TestFailedRecreateKeepsTheSession(t *testing.T) {
	a := newAccount(t)
	const inst = "native-amd64-demo-hello-t1"
	own := filepath.Join(t.TempDir(), "stem-mcp")
	data, err := os.ReadFile(filepath.Join(bins(t), "stem-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(own, data, 0o755)
	a.Env = append(a.Env, "STEM_MCP_BIN="+own)
	a.must(0, "up", "native-amd64", "demo", "hello", "1", "--select")
	type status struct {
		State  string `json:"state"`
		Record struct {
			ContainerID string `json:"container_id"`
			SocketDir   string `json:"socket_dir"`
			CardPath    string `json:"card_path"`
		} `json:"record"`
		Tmux     bool `json:"tmux_answers"`
		Nvim     bool `json:"nvim_answers"`
		Selected bool `json:"selected"`
	}
	statusOf := func() status {
		t.Helper()
		var st status
		r := a.must(0, "status", inst, "--json")
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := statusOf()
	state := filepath.Join(a.Base, "state")
	card := filepath.Join(before.Record.CardPath, ".stem", "instances", inst, "instance.json")
	// The state directory, less the lock files and the log of the service
	// stemctl starts (podman-service.*).
	snap := func() string {
		var keep []string
		for _, l := range strings.Split(withoutLocks(snapshot(t, state)), "\n") {
			if !strings.HasPrefix(l, "podman-service.") {
				keep = append(keep, l)
			}
		}
		cs, _ := os.ReadFile(card)
		return snapshot(t, a.Runtime) + "\n--\n" + strings.Join(keep, "\n") + "\n--\n" + string(cs)
	}
	snapBefore := snap()

	// stem-mcp is rebuilt, and stemctl meets a service without the host's
	// containers.conf.
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(own, append(data, 0), 0o755)
	sockDir, err := os.MkdirTemp("/tmp", "pd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "p.sock")
	var env []string
	for _, kv := range a.Env {
		if !strings.HasPrefix(kv, "CONTAINERS_CONF=") {
			env = append(env, kv)
		}
	}
	saved := a.Env
	a.Env = append(env, "CONTAINER_HOST=unix://"+sock)
	r, err := a.run("up", "native-amd64", "demo", "hello", "1", "--force")
	if _, serr := os.Stat(sock); serr == nil {
		pid := listenerPID(t, sock)
		defer syscall.Kill(pid, syscall.SIGTERM)
	}
	a.Env = saved
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		t.Logf("this host runs containers with Podman's defaults: the re-creation went through (exit %d)", r.Code)
		return
	}
	t.Logf("up through the plain service: exit %d\n%s", r.Code, r.Stderr)
	if r.Code != 1 {
		t.Fatalf("up: exit %d, want 1", r.Code)
	}
	for _, w := range []string{"so its old container " + before.Record.ContainerID[:12] + " was kept and started again", "hint: ", "containers.conf", "service: ", "CONTAINERS_CONF unset"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the error lacks %q", w)
		}
	}
	after := statusOf()
	if after.Record != before.Record || !after.Tmux || !after.Nvim || !after.Selected || after.State != "running" {
		t.Fatalf("after the failed re-creation: %+v, before %+v", after, before)
	}
	if s := snap(); s != snapBefore {
		t.Errorf("the failed re-creation changed files:\nbefore:\n%s\nafter:\n%s", snapBefore, s)
	}
	if r := a.must(0, "list", "--json"); strings.Count(r.Stdout, `"instance": "`) != 1 {
		t.Errorf("list after the failure: %s", r.Stdout)
	}

	// With the usual service it goes through, twice (the second name is
	// taken back by the next re-creation).
	for i := 0; i < 2; i++ {
		a.must(0, "up", "native-amd64", "demo", "hello", "1", "--force")
		st := statusOf()
		if st.Record.ContainerID == before.Record.ContainerID || !st.Selected {
			t.Fatalf("re-creation %d: %+v", i, st)
		}
		if r := a.must(0, "list", "--json"); strings.Count(r.Stdout, `"instance": "`) != 1 || strings.Contains(r.Stdout, "orphan") {
			t.Fatalf("list after re-creation %d: %s", i, r.Stdout)
		}
		// stemctl's engine renames: the new container has the usual name.
		name, err := exec.Command("podman", "inspect", "--format", "{{.Name}}", st.Record.ContainerID).Output()
		if err != nil || !strings.HasPrefix(string(name), inst+"-") || strings.HasSuffix(strings.TrimSpace(string(name)), "-next") {
			t.Fatalf("re-created container %d is named %q (%v), want %s-THREADKEY", i, name, err, inst)
		}
		before = st
		os.WriteFile(own, append(data, 0, byte(i)), 0o755)
		time.Sleep(10 * time.Millisecond)
	}
}
