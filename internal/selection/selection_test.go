package selection

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stem-edu/stem/internal/sockets"
)

func layout(t *testing.T) sockets.Layout {
	d, err := os.MkdirTemp("/tmp", "sel")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return sockets.Layout{Runtime: d}
}

func dir(t *testing.T, l sockets.Layout, c byte) sockets.Dir {
	d, err := l.ForContainer(sockets.ThreadKey("/w"), sockets.InstanceKey(string(c)), strings.Repeat(string(c), 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Create(d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSelectSwitchesAtomically(t *testing.T) {
	l := layout(t)
	if _, err := Current(l); !errors.Is(err, ErrNone) {
		t.Fatalf("fresh layout: %v", err)
	}
	a, b := dir(t, l, 'a'), dir(t, l, 'b')
	if err := Select(l, a); err != nil {
		t.Fatal(err)
	}
	if cur, _ := Current(l); cur != a.Path {
		t.Fatalf("current %s, want %s", cur, a.Path)
	}
	// Readers racing with switches always see a complete link to a or b.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cur, err := Current(l)
			if err != nil || (cur != a.Path && cur != b.Path) {
				select {
				case bad <- cur + " " + errString(err):
				default:
				}
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		d := a
		if i%2 == 0 {
			d = b
		}
		if err := Select(l, d); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case s := <-bad:
		t.Fatalf("a reader saw no or a partial selection: %s", s)
	default:
	}
	ents, _ := os.ReadDir(filepath.Dir(l.Selected()))
	if len(ents) != 1 {
		t.Fatalf("temporary links left: %v", ents)
	}
	// The selected socket paths themselves are reachable through the link.
	if err := os.WriteFile(filepath.Join(a.Path, "probe"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	Select(l, a)
	if _, err := os.Stat(filepath.Join(l.Selected(), "probe")); err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestSelectRefusesOutsideRoot(t *testing.T) {
	l := layout(t)
	if err := Select(l, sockets.Dir{Path: "/etc"}); err == nil {
		t.Fatal("selected a directory outside the stem runtime root")
	}
}

func TestSelectRefusesLongRuntime(t *testing.T) {
	l := sockets.Layout{Runtime: "/tmp/" + strings.Repeat("x", 80)}
	if err := Select(l, sockets.Dir{Path: l.Root() + "/a"}); err == nil {
		t.Fatal("accepted a selection whose socket paths exceed the limit")
	}
}

func TestClear(t *testing.T) {
	l := layout(t)
	Select(l, dir(t, l, 'c'))
	if err := Clear(l); err != nil {
		t.Fatal(err)
	}
	if _, err := Current(l); !errors.Is(err, ErrNone) {
		t.Fatal("selection survived Clear")
	}
	if err := Clear(l); err != nil {
		t.Fatal("clearing twice must be harmless")
	}
}
