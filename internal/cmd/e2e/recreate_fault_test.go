package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// ociFault is the CONTAINERS_CONF under which a Podman service that
// stemctl starts itself cannot start a container, on any host, and how the
// service's line in stemctl's error names it. On a host that needs the
// repository's containers.conf (make sets CONTAINERS_CONF) that is no
// CONTAINERS_CONF at all: the fault a user of such a host meets. Elsewhere
// it is a containers.conf whose nofile limit is above fs.nr_open, which no
// runtime can set: the same refusal ("setrlimit ... operation not
// permitted"), provoked.
func ociFault(t *testing.T) (env []string, service string) {
	t.Helper()
	if os.Getenv("CONTAINERS_CONF") != "" {
		return nil, "CONTAINERS_CONF unset"
	}
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	body := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=4096:4096\"]\n[engine]\nruntime = \"runc\"\n", n+1, n+1)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"CONTAINERS_CONF=" + conf}, "CONTAINERS_CONF=" + conf
}

// withoutConf is env less its CONTAINERS_CONF, plus extra.
func withoutConf(env []string, extra ...string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CONTAINERS_CONF=") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// A re-creation that the OCI runtime refuses leaves the student's instance
// as it was: the old container runs again and answers on its sockets, and
// the record, the selection, the socket directory and the card state are
// unchanged. The refusal is a real one from the OCI runtime, in a Podman
// service stemctl starts itself (ociFault).
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

	// stem-mcp is rebuilt, and stemctl meets a service that cannot start
	// containers.
	os.WriteFile(own, append(data, 0), 0o755)
	sockDir, err := os.MkdirTemp("/tmp", "pd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "p.sock")
	fault, service := ociFault(t)
	saved := a.Env
	a.Env = withoutConf(a.Env, append(fault, "CONTAINER_HOST=unix://"+sock)...)
	r, err := a.run("up", "native-amd64", "demo", "hello", "1", "--force")
	if _, serr := os.Stat(sock); serr == nil {
		pid := listenerPID(t, sock)
		defer syscall.Kill(pid, syscall.SIGTERM)
	}
	a.Env = saved
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up through a service that cannot start containers: exit %d\n%s", r.Code, r.Stderr)
	if r.Code != 1 {
		t.Fatalf("up: exit %d, want 1", r.Code)
	}
	for _, w := range []string{"so its old container " + before.Record.ContainerID[:12] + " was kept and started again", "hint: ", "containers.conf", "service: ", service} {
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
	}
}
