package access

import (
	"encoding/pem"
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
	if _, _, err := CheckKeyFile(p, KeyCheck{}); err != nil {
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
	if _, _, err := CheckKeyFile(ordinary, KeyCheck{}); err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("default identity accepted: %v", err)
	}
	if _, _, err := CheckKeyFile(kp.PublicPath, KeyCheck{}); err == nil {
		t.Fatal(".pub accepted as a private key")
	}
	open := filepath.Join(dir, "stem_open")
	if err := os.WriteFile(open, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckKeyFile(open, KeyCheck{}); err == nil {
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

// A key ssh uses for ordinary logins (IdentityFile in ~/.ssh/config) is
// refused, whatever its name, in each way ssh_config(5) lets one write it.
func TestCheckKeyFileRefusesIdentityFileKeys(t *testing.T) {
	home := t.TempDir()
	kp, err := Keygen(DefaultKeyPath(home, "work"), "work")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, ".ssh", "config")
	link := filepath.Join(home, ".ssh", "stem_link")
	if err := os.Symlink(kp.PrivatePath, link); err != nil {
		t.Fatal(err)
	}
	os.Symlink(kp.PublicPath, link+".pub")
	check := func(key string) error {
		_, _, err := CheckKeyFile(key, KeyCheck{Home: home})
		return err
	}
	if err := check(kp.PrivatePath); err != nil {
		t.Fatalf("no ~/.ssh/config: %v", err)
	}
	for _, line := range []string{
		"IdentityFile ~/.ssh/stem_work",
		"  identityfile=%d/.ssh/stem_work",
		"\tIdentityFile = \"~/.ssh/stem_work\"",
		"IdentityFile ${HOME}/.ssh/stem_work",
		"IdentityFile stem_work", // relative: under ~/.ssh
		"IdentityFile " + kp.PrivatePath,
		"IdentityFile ~/.ssh/stem_%r", // per-user pattern: matches
		"IdentityFile ~/.ssh/stem_link",
	} {
		content := "# my hosts\nHost lab-*\n    User t\n" + line + "\n"
		if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{kp.PrivatePath, link} {
			err := check(key)
			if err == nil || !strings.Contains(err.Error(), "on line 4 of "+cfg) || !strings.Contains(err.Error(), "ordinary key") {
				t.Errorf("config line %q, key %s: %v", line, key, err)
			}
		}
	}
	for _, line := range []string{
		"# IdentityFile ~/.ssh/stem_work",
		"IdentityFile none",
		"IdentityFile ~/.ssh/stem_work2",
		"IdentityFile ~/.ssh/id_ed25519",
		"CertificateFile ~/.ssh/stem_work",
		"IdentityFileX ~/.ssh/stem_work",
		"Include ~/.ssh/stem_work", // Include is not followed (see the doc)
	} {
		if err := os.WriteFile(cfg, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := check(kp.PrivatePath); err != nil {
			t.Errorf("config line %q refused the key: %v", line, err)
		}
	}
	// Without a home the check is skipped (as before).
	os.WriteFile(cfg, []byte("IdentityFile ~/.ssh/stem_work\n"), 0o600)
	if _, _, err := CheckKeyFile(kp.PrivatePath, KeyCheck{}); err != nil {
		t.Fatalf("no home given: %v", err)
	}
}

// Only keygen's keys pass without --force: the .pub beside the key must
// hold the same key with the stem-automation comment.
func TestCheckKeyFileWantsKeygenMarker(t *testing.T) {
	dir := t.TempDir()
	kp, err := Keygen(filepath.Join(dir, "stem_t"), "t")
	if err != nil {
		t.Fatal(err)
	}
	other, err := Keygen(filepath.Join(dir, "stem_o"), "o")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(kp.PrivatePath)
	pub, _ := os.ReadFile(kp.PublicPath)
	otherPub, _ := os.ReadFile(other.PublicPath)
	write := func(name, priv string, pub []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(priv), 0o600); err != nil {
			t.Fatal(err)
		}
		if pub != nil {
			if err := os.WriteFile(p+".pub", pub, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	for _, c := range []struct {
		name string
		pub  []byte
		why  string
	}{
		{"nopub", nil, "there is no nopub.pub beside it"},
		{"laptop", []byte(strings.Replace(string(pub), "stem-automation:t", "teacher@laptop", 1)), `comment "teacher@laptop" lacks the stem-automation: marker`},
		{"nocomment", []byte(strings.Fields(string(pub))[0] + " " + strings.Fields(string(pub))[1] + "\n"), `comment "" lacks`},
		{"swapped", otherPub, "its .pub holds a different key"},
		{"garbage", []byte("stem-automation:t\n"), "is not a public key line"},
	} {
		key := write(c.name, string(data), c.pub)
		_, _, err := CheckKeyFile(key, KeyCheck{})
		if err == nil || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "stemctl access keygen") {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.why)
			continue
		}
		abs, warns, err := CheckKeyFile(key, KeyCheck{Force: true})
		if err != nil || abs != key || len(warns) != 1 || !strings.Contains(warns[0], c.why) || !strings.Contains(warns[0], "ordinary key") {
			t.Errorf("%s with Force: %v %q", c.name, err, warns)
		}
	}
	// Force lifts only the marker rule.
	ordinary := write("id_ed25519", string(data), pub)
	if _, _, err := CheckKeyFile(ordinary, KeyCheck{Force: true}); err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("forced default identity: %v", err)
	}
	// A symlink with an automation-looking name to a default identity.
	link := filepath.Join(dir, "stem_sym")
	os.Symlink(ordinary, link)
	os.Symlink(ordinary+".pub", link+".pub")
	if _, _, err := CheckKeyFile(link, KeyCheck{Force: true}); err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("symlink to id_ed25519: %v", err)
	}
	if _, warns, err := CheckKeyFile(kp.PrivatePath, KeyCheck{}); err != nil || len(warns) != 0 {
		t.Fatalf("keygen's key: %v %q", err, warns)
	}
}

// A passphrase-protected OpenSSH key still shows its public half, so the
// .pub is checked against it; the passphrase itself is only a warning.
func TestCheckKeyFilePassphraseKey(t *testing.T) {
	dir := t.TempDir()
	kp, err := Keygen(filepath.Join(dir, "stem_t"), "t")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Keygen(filepath.Join(dir, "stem_o"), "o")
	data, _ := os.ReadFile(kp.PrivatePath)
	raw, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(dir, "stem_enc")
	os.WriteFile(enc, pem.EncodeToMemory(block), 0o600)
	pub, _ := os.ReadFile(kp.PublicPath)
	os.WriteFile(enc+".pub", pub, 0o644)
	_, warns, err := CheckKeyFile(enc, KeyCheck{})
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], "passphrase") {
		t.Fatalf("encrypted automation key: %v %q", err, warns)
	}
	otherPub, _ := os.ReadFile(other.PublicPath)
	os.WriteFile(enc+".pub", otherPub, 0o644)
	if _, _, err := CheckKeyFile(enc, KeyCheck{}); err == nil || !strings.Contains(err.Error(), "different key") {
		t.Fatalf("encrypted key with another key's .pub: %v", err)
	}
}
