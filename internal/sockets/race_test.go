package sockets

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/beneath/swaptest"
)

// TestSocketDirSwapRace: the container swaps its <cid12> directory (which
// sits in the instance directory it has mounted writable) for a symlink to
// a host directory holding the same names, as fast as it can, while the
// host reads container.json, writes gdb-sync.json and removes dead
// sockets there. Nothing of the host directory may be read, and nothing
// may be created in it or removed from it.
func TestSocketDirSwapRace(t *testing.T) {
	inst, host := runtimeDir(t), runtimeDir(t)
	d := Dir{Path: filepath.Join(inst, cid[:12]), ContainerID: cid}
	if err := os.Mkdir(d.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(d.Path, ContainerJSON, ContainerInfo{ID: "inside"}); err != nil {
		t.Fatal(err)
	}
	// The host directory: a container.json to leak, files and a live
	// socket under the names stem writes or removes.
	os.WriteFile(filepath.Join(host, ContainerJSON), []byte(`{"id":"SECRET"}`), 0o600)
	os.WriteFile(filepath.Join(host, NvimSocket), []byte("host file\n"), 0o600)
	hostSock, err := net.Listen("unix", filepath.Join(host, TmuxSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer hostSock.Close()
	list := func(dir string) string {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return strings.Join(names, " ")
	}
	want := list(host)
	hostFile, err := os.Lstat(filepath.Join(host, NvimSocket))
	if err != nil {
		t.Fatal(err)
	}
	// The real <cid12>, held open so the test can put a socket in it
	// whatever name it has at the moment.
	pin, err := unix.Open(d.Path, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pin)
	inside := fmt.Sprintf("/proc/self/fd/%d/%s", pin, TmuxSocket)

	stop := swaptest.Swap(t, d.Path, host)
	var ok, refused int
	count := func(err error) {
		if err == nil {
			ok++
		} else {
			refused++
		}
	}
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		var info ContainerInfo
		err := ReadJSON(d.Path, ContainerJSON, &info)
		count(err)
		if info.ID == "SECRET" {
			stop()
			t.Fatal("ReadJSON read container.json of the host directory through the swapped <cid12>")
		}
		count(WriteJSON(d.Path, GDBSync, map[string]int{"seq": ok}))
		// A dead socket inside (bound through the pinned descriptor).
		if l, err := net.Listen("unix", inside); err == nil {
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}
		count(d.RemoveSocket(TmuxSocket))
		count(d.Remove(NvimSocket))
		if fi, err := d.Lstat(NvimSocket); err == nil && os.SameFile(fi, hostFile) {
			stop()
			t.Fatal("Lstat described the host's file through the swapped <cid12>")
		}
		if have := list(host); have != want {
			stop()
			t.Fatalf("the host directory changed through the swapped <cid12>:\nhave %s\nwant %s", have, want)
		}
	}
	stop()
	t.Logf("%d calls done, %d refused", ok, refused)
	if ok == 0 || refused == 0 {
		t.Errorf("the race did not happen (%d done, %d refused)", ok, refused)
	}
	if got, _ := os.ReadFile(filepath.Join(host, NvimSocket)); string(got) != "host file\n" {
		t.Errorf("the host file changed: %q", got)
	}
}

// TestListenSwapRace: an agent's supervisor (on the host) binds its
// terminal socket in the socket directory while the container swaps
// <cid12> for a symlink to a host directory and keeps renaming a symlink
// to a host file over the socket's name. No socket may appear in the host
// directory and the host file's mode must not change (a chmod by path
// follows the planted link).
func TestListenSwapRace(t *testing.T) {
	inst, host := runtimeDir(t), runtimeDir(t)
	d := Dir{Path: filepath.Join(inst, cid[:12]), ContainerID: cid}
	if err := os.Mkdir(d.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(host, "victim")
	os.WriteFile(victim, []byte("x"), 0o644)
	name := AgentSocket("abcdef")
	pin, err := unix.Open(d.Path, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pin)
	pinned := fmt.Sprintf("/proc/self/fd/%d/", pin)
	// The planter works in the real <cid12> only (through the pinned
	// descriptor), so the host directory changes only through stem.
	done := make(chan struct{})
	planted := make(chan struct{})
	go func() {
		defer close(planted)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			tmp := pinned + fmt.Sprintf("plant%d", i%2)
			os.Remove(tmp)
			if os.Symlink(victim, tmp) == nil {
				os.Rename(tmp, pinned+name)
			}
		}
	}()
	stop := swaptest.Swap(t, d.Path, host)
	var ok, refused int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		d.Remove(name)
		ln, err := d.Listen(name)
		if err != nil {
			refused++
		} else {
			ok++
			ln.Close()
		}
		if ents, _ := os.ReadDir(host); len(ents) != 1 {
			close(done)
			stop()
			t.Fatalf("the host directory changed: %v", ents)
		}
		if fi, _ := os.Stat(victim); fi == nil || fi.Mode().Perm() != 0o644 {
			close(done)
			stop()
			t.Fatalf("the host file's mode changed through a planted symlink: %v", fi)
		}
	}
	close(done)
	<-planted
	stop()
	t.Logf("%d listened, %d refused", ok, refused)
	if ok == 0 || refused == 0 {
		t.Errorf("the race did not happen (%d listened, %d refused)", ok, refused)
	}
	// Without the race: a socket of mode 0660 in d (the directory, 0700
	// or an ACL naming the container, keeps everyone else out).
	d.Remove(name)
	ln, err := d.Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(filepath.Join(d.Path, name)); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	if err := d.RemoveSocket(name); err != nil {
		t.Fatal(err)
	}
}
