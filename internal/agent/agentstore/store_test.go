package agentstore

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/procstat"
	"github.com/stem-edu/stem/internal/sockets"
)

func TestStoreRecordsAndLiveness(t *testing.T) {
	rt := t.TempDir()
	st := NewStore(sockets.Layout{Runtime: rt}, filepath.Join(t.TempDir(), "state"))
	if st.Root != filepath.Join(rt, "stem", "agents") {
		t.Fatalf("root %s", st.Root)
	}
	self, err := procstat.Start(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	id, dir, err := st.Create()
	if err != nil || !ValidID(id) {
		t.Fatalf("create: %q %v", id, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("agent dir mode %v", fi.Mode().Perm())
	}
	live := Record{ID: id, Provider: "codex", Instance: "i", PID: os.Getpid(), PIDStart: self, Started: time.Now()}
	if err := st.Write(live); err != nil {
		t.Fatal(err)
	}
	// A record whose process ended, and one whose pid was reused by
	// another process (same pid, other start time).
	dead := exec.Command(os.Args[0], "-test.run=^$") // a process that ends at once, with nothing but Go
	dead.Run()
	id2, _, _ := st.Create()
	sock := filepath.Join(rt, "a-"+id2+".sock") // left by a killed supervisor
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	st.Write(Record{ID: id2, PID: dead.Process.Pid, Started: time.Now(), Socket: sock})
	id3, _, _ := st.Create()
	st.Write(Record{ID: id3, PID: os.Getpid(), PIDStart: self + 1, Started: time.Now()})
	// A directory still being set up is left alone.
	id4, _, _ := st.Create()

	all, err := st.List(false)
	if err != nil || len(all) != 3 {
		t.Fatalf("list: %+v %v", all, err)
	}
	running := 0
	for _, s := range all {
		if s.Running {
			running++
			if s.ID != id {
				t.Fatalf("%s counted as running", s.ID)
			}
		} else if s.Problem == "" {
			t.Fatalf("%s: no problem reported", s.ID)
		}
	}
	if running != 1 {
		t.Fatalf("running %d", running)
	}
	pruned, _ := st.List(true)
	if len(pruned) != 1 || pruned[0].ID != id {
		t.Fatalf("after prune: %+v", pruned)
	}
	for _, gone := range []string{id2, id3} {
		if _, err := os.Stat(st.Dir(gone)); !os.IsNotExist(err) {
			t.Fatalf("%s not pruned", gone)
		}
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("a dead agent's socket was left: %v", err)
	}
	if _, err := os.Stat(st.Dir(id4)); err != nil {
		t.Fatalf("a directory being set up was pruned: %v", err)
	}

	// Old logs of ended agents go; the live agent's stays.
	os.MkdirAll(st.LogDir, 0o700)
	old := time.Now().Add(-8 * 24 * time.Hour)
	for _, n := range []string{id, "abcdef"} {
		p := filepath.Join(st.LogDir, n+".log")
		os.WriteFile(p, []byte("x"), 0o600)
		os.Chtimes(p, old, old)
	}
	st.List(true)
	if _, err := os.Stat(filepath.Join(st.LogDir, id+".log")); err != nil {
		t.Fatal("the live agent's log was removed")
	}
	if _, err := os.Stat(filepath.Join(st.LogDir, "abcdef.log")); !os.IsNotExist(err) {
		t.Fatal("an old log was kept")
	}

	if _, err := st.Read("../x"); err == nil || !strings.Contains(err.Error(), "not an agent id") {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := st.Read("000000"); err == nil || !strings.Contains(err.Error(), "stemctl agent list") {
		t.Fatalf("missing id: %v", err)
	}
}

// What a window agent's supervisor wrote shows in the list: an agent
// whose window is gone or that is being stopped is ending, not live in its
// window; one whose process ended says why.
func TestStoreListShowsTheSupervisorsState(t *testing.T) {
	st := NewStore(sockets.Layout{Runtime: t.TempDir()}, t.TempDir())
	self, err := procstat.Start(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command(os.Args[0], "-test.run=^$") // a process that ends at once, with nothing but Go
	dead.Run()
	cases := []struct {
		pid   int
		start uint64
		state *State
		want  string
	}{
		{os.Getpid(), self, nil, ""},
		{os.Getpid(), self, &State{Windows: 1}, ""},
		{os.Getpid(), self, &State{Windows: 0}, "ending: its window was closed"},
		{os.Getpid(), self, &State{Windows: 1, Stopping: "the instance's tmux server is gone"}, "ending: the instance's tmux server is gone"},
		{dead.Process.Pid, 0, &State{Stopping: "its window was closed"}, "it ended: its window was closed"},
	}
	ids := map[string]string{}
	for _, c := range cases {
		id, dir, err := st.Create()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Write(Record{ID: id, Mode: ModeWindow, PID: c.pid, PIDStart: c.start, Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if c.state != nil {
			if err := WriteState(dir, *c.state); err != nil {
				t.Fatal(err)
			}
		}
		ids[id] = c.want
	}
	all, err := st.List(false)
	if err != nil || len(all) != len(cases) {
		t.Fatalf("list: %+v %v", all, err)
	}
	for _, s := range all {
		if want := ids[s.ID]; (want == "") != (s.Problem == "") || !strings.HasPrefix(s.Problem, want) {
			t.Errorf("%s: problem %q, want %q", s.ID, s.Problem, want)
		}
	}
}
