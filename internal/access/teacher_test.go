package access

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	p := DefaultKeyPath(dir, "kowalski")
	kp, err := Keygen(p, "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi, err)
	}
	if d, _ := os.Stat(filepath.Dir(p)); d.Mode().Perm() != 0o700 {
		t.Fatalf(".ssh mode %v", d.Mode())
	}
	data, _ := os.ReadFile(p)
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		t.Fatalf("private key unreadable: %v", err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 || ssh.FingerprintSHA256(signer.PublicKey()) != kp.Fingerprint {
		t.Fatal("public and private halves differ")
	}
	pubData, _ := os.ReadFile(kp.PublicPath)
	if strings.TrimSpace(string(pubData)) != kp.PublicLine {
		t.Fatal(".pub content differs from the printed line")
	}
	if _, err := ParsePublicKey(string(pubData)); err != nil {
		t.Fatalf("the .pub is not grantable: %v", err)
	}
	if _, err := Keygen(p, "kowalski"); err == nil {
		t.Fatal("overwrote an existing key")
	}
	if _, _, err := CheckKeyFile(p); err != nil {
		t.Fatalf("generated key refused: %v", err)
	}
}

func TestCheckKeyFileRefusesOrdinaryAndUnsafeKeys(t *testing.T) {
	dir := t.TempDir()
	kp, err := Keygen(filepath.Join(dir, "stem_t"), "t")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(kp.PrivatePath)
	ordinary := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(ordinary, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckKeyFile(ordinary); err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("default identity accepted: %v", err)
	}
	if _, _, err := CheckKeyFile(kp.PublicPath); err == nil {
		t.Fatal(".pub accepted as a private key")
	}
	open := filepath.Join(dir, "stem_open")
	if err := os.WriteFile(open, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckKeyFile(open); err == nil {
		t.Fatal("world-readable key accepted")
	}
}

func TestTargetCommand(t *testing.T) {
	tg := Target{Host: "anna@lab-03", Key: "/home/t/.ssh/stem_k", Port: 2222, SSHOptions: []string{"UserKnownHostsFile=/tmp/kh"}}
	args, err := tg.Command("mcp", "hazard3-sim-inf-bss-t4")
	if err != nil {
		t.Fatal(err)
	}
	want := "-T -i /home/t/.ssh/stem_k -o BatchMode=yes -o IdentitiesOnly=yes -o ControlPath=none -p 2222 -o UserKnownHostsFile=/tmp/kh anna@lab-03 mcp hazard3-sim-inf-bss-t4"
	if strings.Join(args, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(args, " "), want)
	}
	for _, bad := range []Target{
		{Host: "-oProxyCommand=sh", Key: "/k"},
		{Host: "anna@host;id", Key: "/k"},
		{Host: "anna@host name", Key: "/k"},
		{Host: "anna@host", Key: "relative"},
		{Host: "anna@host", Key: "/k", SSHOptions: []string{"ProxyCommand=sh -c id"}},
		{Host: "anna@host", Key: "/k", SSHOptions: []string{"proxycommand=nc"}},
		{Host: "anna@host", Key: "/k", SSHOptions: []string{"IdentityFile=/home/t/.ssh/id_ed25519"}},
		{Host: "anna@host", Key: "/k", SSHOptions: []string{"LocalCommand=id"}},
		{Host: "anna@host", Key: "/k", Port: 70000},
	} {
		if _, err := bad.Command("status"); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}
