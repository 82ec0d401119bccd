package instance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/lib/posixacl"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
)

// The design contract's "Runtime sockets" and "Selecting the instance",
// checked against a real container:
//
//   - the socket directory is <runtime>/stem/<thread-key>/<instance-key>/<cid12>/,
//     every level 0700 and owned by the user, every socket path under 100 bytes;
//   - it is bind-mounted at the same absolute path, and the processes inside
//     create t.sock and n.sock there;
//   - container.json holds the container id, labels, profile and creation time;
//   - creating a container never takes over the selection by itself: not
//     when nothing is selected, not when another instance is.
func TestDesignSocketsAndSelection(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()

	// Nothing selected: the first up selects nothing.
	a := w.up(w.resolve("native-amd64", "demo", "hello", "1", ""))
	if a.Action != instance.Created {
		t.Fatalf("first up: %+v", a)
	}
	if cur, err := selection.Current(w.m.Layout); !errors.Is(err, selection.ErrNone) {
		t.Fatalf("creating %s selected %q (%v)", a.Record.Instance, cur, err)
	}
	rec := a.Record
	dir := rec.Dir()

	// Layout and modes, from the runtime's stem root down to <cid12>.
	want := filepath.Join(w.m.Layout.Root(), rec.ThreadKey, rec.InstanceKey, rec.ContainerID[:12])
	if rec.SocketDir != want || dir.Path != want {
		t.Fatalf("socket dir %s, want %s", rec.SocketDir, want)
	}
	for p := want; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || groupMode(p, fi.Mode()).Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v uid %d, want a 0700 directory of uid %d", p, fi.Mode(), st.Uid, os.Geteuid())
		}
		// The instance directory and the container's own name the
		// container's root (search only, and everything) and no one else.
		idm, _ := w.m.IDMap()
		acl, _ := posixacl.GetPath(p)
		for _, uid := range acl.Named() {
			if uid != idm.Host {
				t.Errorf("%s: its ACL names uid %d", p, uid)
			}
		}
		if wantACL := p == want || p == filepath.Dir(want); wantACL != (len(acl.Named()) == 1) || acl.HasNamedGroups() {
			t.Errorf("%s: ACL %+v", p, acl)
		}
		if p == w.m.Layout.Root() {
			break
		}
	}
	for _, s := range []string{dir.Tmux(), dir.Nvim(), dir.GDB(), w.m.Layout.Selected() + "/n.sock"} {
		if len(s) >= sockets.MaxPath {
			t.Errorf("socket path %s is %d bytes", s, len(s))
		}
	}
	for _, s := range []string{dir.Tmux(), dir.Nvim()} {
		fi, err := os.Lstat(s)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("%s is not a socket: %v %v", s, fi, err)
		}
	}

	// Inside the container: the same absolute path, with the same sockets
	// (created there by tmux and nvim).
	code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c",
		`test "$(pwd)" = "$1" && test -S "$2/t.sock" && test -S "$2/n.sock" && test -f "$2/container.json"`, "sh", rec.CardPath, dir.Path},
		WorkDir: rec.CardPath})
	if err != nil || code != 0 {
		t.Fatalf("inside the container the card and the socket directory are not at the host's paths (exit %d, %v)", code, err)
	}

	// container.json.
	var info sockets.ContainerInfo
	if err := sockets.ReadJSON(dir.Path, sockets.ContainerJSON, &info); err != nil {
		t.Fatal(err)
	}
	created, err := time.Parse(time.RFC3339Nano, info.Created)
	if info.ID != rec.ContainerID || info.Instance != rec.Instance || info.Profile != "native-amd64" ||
		info.Labels[labels.Instance] != rec.Instance || info.Labels[labels.Profile] != "native-amd64" ||
		err != nil || created.IsZero() || time.Since(created) > time.Hour || !strings.HasSuffix(info.SocketDir, rec.ContainerID[:12]) {
		t.Fatalf("container.json: %+v (created: %v)", info, err)
	}

	// Another instance selected: creating a new one leaves it.
	if err := selection.Select(w.m.Layout, dir); err != nil {
		t.Fatal(err)
	}
	b := w.up(w.resolve("hazard3-sim", "inf", "bss", "4", ""))
	if b.Action != instance.Created || b.Record.Instance != "hazard3-sim-inf-bss-t4" {
		t.Fatalf("second instance: %+v", b)
	}
	if cur, err := selection.Current(w.m.Layout); err != nil || cur != rec.SocketDir {
		t.Fatalf("creating %s moved the selection to %q (%v), want %s", b.Record.Instance, cur, err, rec.SocketDir)
	}
}
