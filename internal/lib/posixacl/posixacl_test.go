package posixacl

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEncodeDecode(t *testing.T) {
	a := FromMode(0o750).With(100000, RWX).With(1001, Read)
	got, err := decode(a.encode())
	if err != nil {
		t.Fatal(err)
	}
	// Encoding sorts by tag, then id.
	want := ACL{
		{Tag: UserObj, Perm: RWX, ID: noID},
		{Tag: User, Perm: Read, ID: 1001},
		{Tag: User, Perm: RWX, ID: 100000},
		{Tag: GroupObj, Perm: Read | Exec, ID: noID},
		{Tag: Mask, Perm: RWX, ID: noID},
		{Tag: Other, Perm: 0, ID: noID},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range [][]byte{nil, {2, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0, 1}} {
		if _, err := decode(bad); err == nil {
			t.Errorf("decode(%v) accepted", bad)
		}
	}
}

func TestMaskLimitsNamedUsers(t *testing.T) {
	a := FromMode(0o700).With(7, RWX)
	if a.Effective(7) != RWX {
		t.Fatalf("effective %o", a.Effective(7))
	}
	// A chmod 0640 sets the mask to r--.
	for i := range a {
		if a[i].Tag == Mask {
			a[i].Perm = Read
		}
	}
	if a.Effective(7) != Read || a.Effective(8) != 0 {
		t.Fatalf("effective %o %o", a.Effective(7), a.Effective(8))
	}
	// With recomputes the mask from the group class, as setfacl -m does.
	if b := a.With(9, Read); b.Effective(7) != RWX {
		t.Fatalf("after With: %o", b.Effective(7))
	}
}

// TestSetGet writes real ACLs (the kernel checks the format) and reads
// them back, through O_PATH descriptors.
func TestSetGet(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(f, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if a, err := Get(fd, false); err != nil || a != nil {
		t.Fatalf("a new file has ACL %v (%v)", a, err)
	}
	want := FromMode(0o600).With(4242, Read|Write)
	if err := Set(fd, false, want); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("no ACLs on %s: %v", dir, err)
		}
		t.Fatal(err)
	}
	got, err := Get(fd, false)
	if err != nil || got.Effective(4242) != Read|Write {
		t.Fatalf("read back %+v (%v)", got, err)
	}
	fi, _ := os.Stat(f)
	if fi.Mode().Perm() != 0o660 { // the mask shows as the group bits
		t.Fatalf("mode %o", fi.Mode().Perm())
	}
	if p, err := GetPath(f); err != nil || p.Effective(4242) != Read|Write {
		t.Fatalf("GetPath %+v %v", p, err)
	}
	if err := Set(fd, true, want); err == nil {
		t.Fatal("a default ACL was set on a regular file")
	}
}
