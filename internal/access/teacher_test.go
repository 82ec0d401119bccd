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

func TestFindAutomationKeys(t *testing.T) {
	home := t.TempDir()
	if keys, err := FindAutomationKeys(home); err != nil || len(keys) != 0 {
		t.Fatalf("no ~/.ssh: %v %v", keys, err)
	}
	b, err := Keygen(DefaultKeyPath(home, "b"), "b")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Keygen(DefaultKeyPath(home, "a"), "a")
	if err != nil {
		t.Fatal(err)
	}
	ssh := filepath.Join(home, ".ssh")
	data, _ := os.ReadFile(a.PrivatePath)
	pub, _ := os.ReadFile(a.PublicPath)
	for name, content := range map[string]string{
		"id_ed25519":          string(data), // ordinary
		"id_ed25519.pub":      strings.Replace(string(pub), "stem-automation:a", "t@laptop", 1),
		"stem_nopub":          string(data), // no .pub beside it
		"stem_plain":          string(data),
		"stem_plain.pub":      strings.Replace(string(pub), "stem-automation:a", "t@laptop", 1), // no marker
		"stem_garbage":        string(data),
		"stem_garbage.pub":    "not a key stem-automation:x\n",
		"other_x":             string(data),
		"other_x.pub":         string(pub), // marked, but not keygen's file name
		"stem_lonely_pub.pub": string(pub),
	} {
		if err := os.WriteFile(filepath.Join(ssh, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A directory named like a key is not one.
	os.Mkdir(filepath.Join(ssh, "stem_dir"), 0o700)
	os.WriteFile(filepath.Join(ssh, "stem_dir.pub"), pub, 0o644)
	keys, err := FindAutomationKeys(home)
	if err != nil || len(keys) != 2 || keys[0] != a.PrivatePath || keys[1] != b.PrivatePath {
		t.Fatalf("keys = %v, %v; want [%s %s]", keys, err, a.PrivatePath, b.PrivatePath)
	}
}
