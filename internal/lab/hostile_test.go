package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

func testOptions(t *testing.T) *Options {
	return &Options{Dir: t.TempDir(), CacheDir: t.TempDir(), Host: "labhost", SubIDs: idmap.DefaultFiles,
		LingerDir: "/var/lib/systemd/linger", SystemdDir: "/run/systemd/system", TmpfilesDir: "/etc/tmpfiles.d", Lock: "/run/stem-lab.lock"}
}

// TestHostileHome: a student who points ~/.config and the workspace at
// root's directories gets nothing written there (lab writes as the
// student); the control shows root's own write would have landed. An
// account made without subordinate ids gets a range no one else has,
// once. A system account is refused.
func TestHostileHome(t *testing.T) {
	needs.Real(t, "real accounts")
	needs.Root(t, "creates accounts")
	b := make([]byte, 4)
	rand.Read(b)
	name := testenv.AccountPrefix + "h" + hex.EncodeToString(b)
	o := testOptions(t)
	o.Cards = filepath.Join(testenv.RepoRoot(), "examples", "workspace")
	t.Cleanup(func() { Remove(context.Background(), o, name, time.Now()) })
	ctx := context.Background()
	if err := passwd(ctx, "useradd", "-m", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0", name); err != nil {
		t.Fatal(err)
	}
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	canary := t.TempDir() // root's, 0700 then 0755: the student may look, not write
	os.Chmod(canary, 0o755)
	for _, d := range []string{"config", "ws"} {
		os.Mkdir(filepath.Join(canary, d), 0o755)
	}
	if out, err := a.Command(ctx, "sh", "-c", `ln -s "$1/config" .config && mkdir -p dev/workspace && ln -s "$1/ws" dev/workspace/stem`, "sh", canary).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	steps, err := Add(ctx, o, []Student{{Name: name}})
	if err == nil {
		t.Fatalf("an account whose files could not be written is ready: %+v", steps)
	}
	got := map[string]Step{}
	for _, s := range steps {
		got[s.Name] = s
	}
	if s := got["podman config"]; s.Result != Failed {
		t.Errorf("podman config: %+v", s)
	}
	if s := got["cards"]; s.Result != Failed {
		t.Errorf("cards: %+v", s)
	}
	if s := got["subordinate ids"]; s.Result != Done {
		t.Errorf("subordinate ids: %+v", s)
	}
	if r := doctor.CheckSubIDs(&doctor.Env{User: name, UID: a.UID, SubIDs: o.SubIDs}); r.Status != doctor.OK {
		t.Errorf("the range given: %+v", r)
	}
	if s := got["roster"]; s.Result != Done {
		t.Errorf("roster: %+v", s)
	}
	var found []string
	filepath.Walk(canary, func(p string, _ os.FileInfo, _ error) error {
		if rel, _ := filepath.Rel(canary, p); rel != "." && rel != "config" && rel != "ws" {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Fatalf("lab wrote into root's directories through the student's links: %v", found)
	}
	// Control: the same file written by root itself follows the link.
	p := filepath.Join(a.Home, ".config", "containers", "storage.conf")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(plainStorageConf), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(canary, "config", "containers", "storage.conf")); err != nil {
		t.Fatalf("control: root's write did not follow the link: %v", err)
	}

	// Again: the range is kept, not a second one added.
	steps, _ = Add(ctx, o, []Student{{Name: name}})
	for _, s := range steps {
		if s.Name == "subordinate ids" && s.Result != Already {
			t.Errorf("second run: %+v", s)
		}
	}
	sub, _ := os.ReadFile("/etc/subuid")
	if n := strings.Count("\n"+string(sub), "\n"+name+":"); n != 1 {
		t.Errorf("%d ranges for %s in /etc/subuid", n, name)
	}

	// A system account is never touched.
	if _, err := Add(ctx, o, []Student{{Name: "daemon"}}); err == nil {
		t.Error("daemon was prepared")
	}
	if _, err := Remove(ctx, o, "daemon", time.Now()); err == nil || !strings.Contains(err.Error(), "system account") {
		t.Errorf("daemon removed: %v", err)
	}
	if _, err := exec.LookPath("id"); err == nil {
		if out, _ := exec.Command("id", "daemon").Output(); len(out) == 0 {
			t.Error("daemon is gone")
		}
	}
}

// TestConcurrentRanges: two lab runs at once, each for an account without
// subordinate ids, give them ranges that do not overlap. The control:
// the free range both would see without the lock is the same one.
func TestConcurrentRanges(t *testing.T) {
	needs.Real(t, "real accounts")
	needs.Root(t, "creates accounts")
	ctx := context.Background()
	o := testOptions(t)
	var names []string
	for i := 0; i < 2; i++ {
		b := make([]byte, 4)
		rand.Read(b)
		name := testenv.AccountPrefix + "r" + hex.EncodeToString(b)
		t.Cleanup(func() { Remove(context.Background(), o, name, time.Now()) })
		if err := passwd(ctx, "useradd", "-m", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0", name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if a, b := doctor.FreeRange(o.SubIDs), doctor.FreeRange(o.SubIDs); a != b {
		t.Fatalf("control: two reads gave %d and %d", a, b)
	}
	errs := make(chan error, 2)
	for _, n := range names {
		go func() {
			_, err := Add(ctx, o, []Student{{Name: n}})
			errs <- err
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, n := range names {
		a, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		if r := doctor.CheckSubIDs(&doctor.Env{User: n, UID: a.UID, SubIDs: o.SubIDs}); r.Status != doctor.OK {
			t.Errorf("%s: %+v", n, r)
		}
	}
	if rows, _ := ReadRoster(o.Dir); len(rows) != 2 {
		t.Errorf("roster: %+v", rows)
	}
}
