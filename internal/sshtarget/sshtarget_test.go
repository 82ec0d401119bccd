package sshtarget

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/teacherkey"
)

func TestResolveRefusesBeforeSSH(t *testing.T) {
	home := t.TempDir()
	self := func() (string, error) { return "/nonexistent/stemctl", nil }
	var fe *cmdutil.FlagError
	if _, _, err := Resolve(context.Background(), Request{Home: home, Self: self}); !errors.As(err, &fe) || !strings.Contains(err.Error(), "--host") {
		t.Fatalf("no host: %v", err)
	}
	_, _, err := Resolve(context.Background(), Request{Host: "anna@lab1", Home: home, Self: self})
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "no automation key") || !strings.Contains(err.Error(), "stemctl access keygen") {
		t.Fatalf("no key at all: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(home, n), n); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = Resolve(context.Background(), Request{Host: "anna@lab1", Home: home, Self: self})
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "2 automation keys") {
		t.Fatalf("two keys, none named: %v", err)
	}
}

func TestOtherIdentities(t *testing.T) {
	v := sshView{identities: []string{"/h/.ssh/stem_a", "/h/.ssh/id_ed25519"}}
	if got := v.otherIdentities("/h/.ssh/stem_a"); len(got) != 1 || got[0] != "/h/.ssh/id_ed25519" {
		t.Fatalf("others: %v", got)
	}
}
