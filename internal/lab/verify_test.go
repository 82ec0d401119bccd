package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/needs"
)

// testStore is a shared store whose image list has mode perm, under
// directories every account can search; FUSE is /dev/null and the mount
// program /bin/sh (both there, both usable by all), so only the store
// decides.
func testStore(t *testing.T, perm os.FileMode) *Shared {
	t.Helper()
	dir, err := os.MkdirTemp("", "stemlab-verify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	s := &Shared{Root: filepath.Join(dir, "storage"), Fuse: "/dev/null", MountProgram: "/bin/sh"}
	list := filepath.Join(s.Root, "overlay-images", "images.json")
	if err := os.MkdirAll(filepath.Dir(list), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, []byte("[]"), perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(list, perm)
	return s
}

// TestStoreCheck: root's own look at the store passes when every account
// can reach its image list, and fails naming the directory or file that
// stops them; without a shared store it is the account's check.
func TestStoreCheck(t *testing.T) {
	t.Parallel()
	s := testStore(t, 0o644)
	if r, ok := storeCheck(s); !ok || r.Status != doctor.OK || !r.Required {
		t.Fatalf("readable: %+v %v", r, ok)
	}
	os.Chmod(filepath.Join(s.Root, "overlay-images", "images.json"), 0o600)
	if r, _ := storeCheck(s); r.Status != doctor.Fail || !strings.Contains(r.Detail, "images.json (0600)") || !strings.Contains(r.Fix, "lab init") {
		t.Fatalf("list 0600: %+v", r)
	}
	os.Chmod(filepath.Join(s.Root, "overlay-images", "images.json"), 0o644)
	os.Chmod(s.Root, 0o700)
	if r, _ := storeCheck(s); r.Status != doctor.Fail || !strings.Contains(r.Detail, s.Root+" (0700) is not searchable") {
		t.Fatalf("store 0700: %+v", r)
	}
	os.RemoveAll(s.Root)
	if r, _ := storeCheck(s); r.Status != doctor.Fail {
		t.Fatalf("no store: %+v", r)
	}
	if _, ok := storeCheck(nil); ok {
		t.Error("no shared store, yet root checked it")
	}
	s = testStore(t, 0o644)
	s.MountProgram = "/nonexistent/fuse-overlayfs"
	if _, ok := storeCheck(s); ok {
		t.Error("FUSE not usable (the accounts keep their own images), yet root checked the store")
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	// The account answers subordinate-ids twice, hoping one survives.
	account := []doctor.Result{{Name: "podman", Status: doctor.OK}, {Name: "subordinate-ids", Status: doctor.OK},
		{Name: "workspace", Status: doctor.OK}, {Name: "subordinate-ids", Status: doctor.OK}}
	root := []doctor.Result{{Name: "subordinate-ids", Status: doctor.Fail}, {Name: "shared-store", Status: doctor.OK}}
	got := merge(account, root)
	var names, by []string
	for _, c := range got {
		names = append(names, c.Name)
		by = append(by, c.By)
	}
	if strings.Join(names, ",") != "podman,subordinate-ids,workspace,shared-store" ||
		strings.Join(by, ",") != "account,root,account,root" || got[1].Status != doctor.Fail {
		t.Fatalf("%+v", got)
	}
}

// TestStatusDoesNotTrustTheAccount: an account whose stemctl doctor says
// everything is fine (as a student can make it say) but which has no
// subordinate ids, no runtime directory and an unreadable shared store
// is not ready, and root names each; the control is the account's own
// report, which says ready. Once lab has made them, the account is ready,
// and the checks only its doctor answered are marked as the account's.
func TestStatusDoesNotTrustTheAccount(t *testing.T) {
	needs.Real(t, "real accounts")
	needs.Root(t, "creates accounts")
	b := make([]byte, 4)
	rand.Read(b)
	name := testenv.AccountPrefix + "v" + hex.EncodeToString(b)
	o := testOptions(t)
	t.Cleanup(func() { Remove(context.Background(), o, name, time.Now()) })
	ctx := context.Background()
	if err := passwd(ctx, "useradd", "-m", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0", name); err != nil {
		t.Fatal(err)
	}
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(a.Runtime())
	o.Shared = testStore(t, 0o600)
	// The student's doctor: every check fine, whatever the facts.
	bin, err := os.MkdirTemp("", "stemlab-liar")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	os.Chmod(bin, 0o755)
	o.Stemctl = filepath.Join(bin, "stemctl")
	liar := `{"ok":true,"checks":[` +
		`{"name":"podman","status":"ok","required":true,"detail":"fine"},` +
		`{"name":"subordinate-ids","status":"ok","required":true,"detail":"fine"},` +
		`{"name":"runtime-dir","status":"ok","required":true,"detail":"fine"},` +
		`{"name":"shared-store","status":"ok","required":true,"detail":"fine"},` +
		`{"name":"image native-amd64","status":"ok","required":true,"detail":"fine"}]}`
	if err := os.WriteFile(o.Stemctl, []byte("#!/bin/sh\ncat <<'EOF'\n"+liar+"\nEOF\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if st := addToRoster(o, name); st.Result == Failed {
		t.Fatal(st.Detail)
	}

	own, err := accountDoctor(ctx, o, a)
	if err != nil || doctor.Failed(own) || len(own) != 5 {
		t.Fatalf("control: the account's own report %+v %v", own, err)
	}
	sts, err := Check(ctx, o, nil)
	if err != nil || len(sts) != 1 {
		t.Fatalf("%+v %v", sts, err)
	}
	st := sts[0]
	if st.Ready {
		t.Fatalf("ready on the account's word: %+v", st)
	}
	for _, want := range []string{"subordinate-ids", "runtime-dir", "shared-store"} {
		if !slices.Contains(st.Missing, want) {
			t.Errorf("%s not named: missing %v", want, st.Missing)
		}
	}
	if slices.Contains(st.Missing, "podman") || slices.Contains(st.Missing, "image native-amd64") {
		t.Errorf("missing %v names what only the account answered", st.Missing)
	}

	// Under the machine's lock, as lab takes it: another lab run may be
	// choosing ranges now.
	if s := locked(ctx, o, name, "subordinate ids", func() Step { return ensureSubIDs(ctx, o, a) }); s.Result != Done {
		t.Fatalf("subordinate ids: %+v", s)
	}
	if s := ensureRuntime(ctx, o, a); s.Result != Done {
		t.Fatalf("runtime directory: %+v", s)
	}
	os.Chmod(filepath.Join(o.Shared.Root, "overlay-images", "images.json"), 0o644)
	sts, err = Check(ctx, o, []string{name})
	if err != nil || len(sts) != 1 || !sts[0].Ready {
		t.Fatalf("after lab made them: %+v %v", sts, err)
	}
	by := map[string]string{}
	for _, c := range sts[0].Checks {
		by[c.Name] = c.By
	}
	for name, want := range map[string]string{"subordinate-ids": ByRoot, "runtime-dir": ByRoot, "runtime-dir-lasts": ByRoot,
		"shared-store": ByRoot, "podman": ByAccount, "image native-amd64": ByAccount} {
		if by[name] != want {
			t.Errorf("%s answered by %q, want %s", name, by[name], want)
		}
	}
}

// TestDoctorFix: an account that cannot run stemctl is fixed by
// installing it where every account can; any other failure of its
// doctor by seeing the doctor's own error.
func TestDoctorFix(t *testing.T) {
	t.Parallel()
	o := &Options{Stemctl: "/root/stem/bin/stemctl"}
	a := &Account{Name: "anna"}
	denied := fmt.Errorf("doctor: %w", &fs.PathError{Op: "fork/exec", Path: o.Stemctl, Err: syscall.EACCES})
	if f := doctorFix(o, a, denied); !strings.HasPrefix(f, "(as root) install -m 0755 "+o.Stemctl+" /usr/local/bin/stemctl") {
		t.Errorf("permission denied: %q", f)
	}
	if f := doctorFix(o, a, errors.New("doctor: unexpected end of JSON input")); f != "(as root) runuser -l anna -c '"+o.Stemctl+" doctor'   (its own error shows)" {
		t.Errorf("no report: %q", f)
	}
}
