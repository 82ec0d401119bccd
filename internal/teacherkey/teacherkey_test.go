package teacherkey

import (
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/testenv/needs"
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
	if _, err := access.ParsePublicKey(string(pubData)); err != nil {
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
	want := "-T -a -x -i /home/t/.ssh/stem_k -o BatchMode=yes -o IdentitiesOnly=yes -o ControlPath=none -o PreferredAuthentications=publickey -o ClearAllForwardings=yes -o PermitLocalCommand=no -p 2222 -o UserKnownHostsFile=/tmp/kh anna@lab-03 mcp hazard3-sim-inf-bss-t4"
	if strings.Join(args, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(args, " "), want)
	}
	tg.Dial = "/usr/local/bin/stemctl"
	args, _ = tg.Command("status")
	if want := "-o UserKnownHostsFile=/tmp/kh -o ProxyUseFdpass=no -o ProxyCommand=/usr/local/bin/stemctl teacher dial '%h' %p anna@lab-03 status"; !strings.HasSuffix(strings.Join(args, " "), want) {
		t.Fatalf("with Dial: %s\nwant ... %s", strings.Join(args, " "), want)
	}
	// An IPv6 address in brackets loses them (ssh would look [::1] up as a
	// name, and the shell would take it for a glob in the ProxyCommand).
	for host, want := range map[string]string{"anna@[::1]": "anna@::1", "[fe80::1%eth0]": "fe80::1%eth0", "anna@::1": "anna@::1"} {
		args, err := Target{Host: host, Key: "/k"}.Command()
		if err != nil || args[len(args)-1] != want {
			t.Errorf("host %s: %v %v, want %s last", host, args, err, want)
		}
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
		{Host: "anna@host", Key: "/k/stem_%u"},
		{Host: "anna@host", Key: "/k/${HOME}/stem_k"},
		{Host: "anna@[ab]c", Key: "/k"},
		{Host: "anna@lab]", Key: "/k"},
		{Host: "anna@[::1", Key: "/k"},
		{Host: "anna@[]", Key: "/k"},
		{Host: "anna@*", Key: "/k"},
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
	// ssh reads the passwd entry's home whatever $HOME says: a config there
	// counts as well, its ~ meaning that home.
	if _, _, err := CheckKeyFile(kp.PrivatePath, KeyCheck{Home: t.TempDir(), SSHHome: home}); err == nil || !strings.Contains(err.Error(), "of "+cfg) {
		t.Fatalf("IdentityFile in ssh's own home: %v", err)
	}
	if _, _, err := CheckKeyFile(kp.PrivatePath, KeyCheck{Home: home, SSHHome: home}); err == nil {
		t.Fatal("the same home given twice: not checked")
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

// --ssh-option takes options about reaching the host and checking its
// key, with values the shell cannot act on; everything else is refused,
// including ssh's aliases (IdentityFile2, SmartcardDevice) of refused
// options and options that run commands, load code, bring other keys or
// credentials, or forward the teacher's agent or ports.
func TestSSHOptionsAreAllowListed(t *testing.T) {
	for _, o := range []string{
		"UserKnownHostsFile=/tmp/kh", "userknownhostsfile=~/.ssh/kh_%h", "StrictHostKeyChecking=yes",
		"ProxyJump=jump.example", "ProxyJump=t@[::1]:2222,t@jump2", "ProxyJump=none",
		"KexAlgorithms=curve25519-sha256", "Ciphers=^aes128-gcm@openssh.com", "MACs=-hmac-sha1",
		"Hostname=lab-03.example", "Hostname=%h.lab.example", "User=anna", "Port=2222",
		"ConnectTimeout=5", "HostKeyAlias=lab-03", "LogLevel=ERROR", "GlobalKnownHostsFile=/dev/null",
	} {
		if _, err := (Target{Host: "anna@lab", Key: "/k", SSHOptions: []string{o}}).Command(); err != nil {
			t.Errorf("%s refused: %v", o, err)
		}
	}
	for _, o := range []string{
		// other keys, credentials, code
		"IdentityFile2=/root/.ssh/id_ed25519", "identityfile=/root/.ssh/id_ed25519", "CertificateFile=/root/.ssh/id_ed25519-cert.pub",
		"IdentityAgent=/tmp/agent", "PKCS11Provider=/tmp/evil.so", "SmartcardDevice=/tmp/evil.so", "SecurityKeyProvider=/tmp/evil.so",
		"PreferredAuthentications=gssapi-with-mic", "GSSAPIAuthentication=yes", "HostbasedAuthentication=yes", "AddKeysToAgent=yes",
		// commands
		"ProxyCommand=nc %h %p", "KnownHostsCommand=/tmp/x", "LocalCommand=id", "PermitLocalCommand=yes", "RemoteCommand=id",
		"Match=exec id", "Include=/tmp/x",
		// undo what the entry sets
		"IdentitiesOnly=no", "BatchMode=no", "ControlPath=/tmp/cm", "ControlMaster=auto", "ProxyUseFdpass=yes",
		"ClearAllForwardings=no", "RequestTTY=force", "SessionType=none", "StdinNull=yes", "ForkAfterAuthentication=yes",
		// the teacher's agent, display, ports, environment
		"ForwardAgent=yes", "ForwardX11=yes", "ForwardX11Trusted=yes", "RemoteForward=2222:localhost:22",
		"LocalForward=2222:localhost:22", "DynamicForward=1080", "Tunnel=yes", "SendEnv=*", "SetEnv=LD_PRELOAD=/x",
		// values the shell would act on (Hostname is %h in a ProxyCommand)
		"Hostname=a$(id>pwned)", "Hostname=a;id", "Hostname=a|id", "Hostname=a&id", "Hostname=`id`", "Hostname=lab[0-9]",
		"Hostname=lab*", "User=a>b", "ProxyJump=j;id", "Hostname=a'b", "Hostname=a\"b", "Hostname=a\\b", "Hostname=a b",
		"Hostname=", "Hostname", "=x", "Hostname=a\nb",
	} {
		if _, err := (Target{Host: "anna@lab", Key: "/k", SSHOptions: []string{o}}).Command(); err == nil {
			t.Errorf("%q accepted", o)
		}
	}
}

// Every option --ssh-option allows is one this machine's ssh knows, so the
// allow list holds no misspelling a teacher would hit only when connecting.
func TestAllowedSSHOptionsAreSSHs(t *testing.T) {
	needs.Program(t, "ssh", "openssh-client")
	values := map[string]string{"port": "22", "connecttimeout": "5", "connectionattempts": "1", "canonicalizemaxdots": "1",
		"serveralivecountmax": "3", "serveraliveinterval": "5", "requiredrsasize": "2048", "rekeylimit": "1G",
		"addressfamily": "any", "loglevel": "ERROR", "stricthostkeychecking": "yes", "fingerprinthash": "sha256",
		"updatehostkeys": "no", "verifyhostkeydns": "no", "canonicalizehostname": "no", "ipqos": "lowdelay",
		"kexalgorithms": "curve25519-sha256", "ciphers": "aes128-ctr", "macs": "hmac-sha2-256",
		"hostkeyalgorithms": "ssh-ed25519", "casignaturealgorithms": "ssh-ed25519", "pubkeyacceptedalgorithms": "ssh-ed25519",
		"pubkeyacceptedkeytypes": "ssh-ed25519", "bindinterface": "lo", "bindaddress": "127.0.0.1", "proxyjump": "none"}
	for _, name := range SSHOptionsAllowed() {
		v := values[name]
		if v == "" {
			v = "yes"
			if strings.HasSuffix(name, "file") || strings.HasSuffix(name, "alias") || name == "hostname" || name == "user" || name == "canonicaldomains" {
				v = "x"
			}
		}
		out, err := exec.Command("ssh", "-F", "/dev/null", "-G", "-o", name+"="+v, "h").CombinedOutput()
		if err != nil {
			t.Errorf("ssh -G -o %s=%s: %v\n%s", name, v, err, out)
		}
	}
}

// The options Command puts first win over whatever ~/.ssh/config says for
// the host (ssh keeps the first value it reads); GSSAPI and host-based
// logins stay configured but are never tried, PreferredAuthentications
// being publickey alone. The real ssh's -G, which
// prints the options it would use, is given a configuration that tries to
// undo each of them.
func TestCommandWinsOverSSHConfig(t *testing.T) {
	needs.Program(t, "ssh", "openssh-client")
	dir := t.TempDir()
	kp, err := Keygen(filepath.Join(dir, "stem_k"), "k")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	hostile := `Host *
  BatchMode no
  IdentitiesOnly no
  ControlMaster auto
  ControlPath /tmp/cm-%C
  ForwardAgent yes
  ForwardX11 yes
  ForwardX11Trusted yes
  LocalForward 127.0.0.1:5555 127.0.0.1:22
  RemoteForward 127.0.0.1:6666 127.0.0.1:22
  DynamicForward 7777
  PermitLocalCommand yes
  LocalCommand touch /tmp/localcommand-ran
  GSSAPIAuthentication yes
  GSSAPIDelegateCredentials yes
  HostbasedAuthentication yes
  PreferredAuthentications gssapi-with-mic,hostbased,publickey
  ProxyUseFdpass yes
  ProxyCommand nc %h %p
  RequestTTY force
`
	if err := os.WriteFile(cfg, []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	args, err := Target{Host: "anna@lab-03", Key: kp.PrivatePath, Dial: "/usr/local/bin/stemctl"}.Command("mcp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh", append([]string{"-F", cfg, "-G"}, args...)...).Output()
	if err != nil {
		t.Fatalf("ssh -G: %v", err)
	}
	got := map[string][]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = append(got[k], v)
		}
	}
	for k, want := range map[string]string{
		"batchmode": "yes", "identitiesonly": "yes", "forwardagent": "no", "forwardx11": "no",
		"clearallforwardings": "yes", "permitlocalcommand": "no", "preferredauthentications": "publickey",
		"proxyusefdpass": "no", "requesttty": "false",
		"proxycommand": "/usr/local/bin/stemctl teacher dial '%h' %p", "identityfile": kp.PrivatePath,
	} {
		if v := got[k]; len(v) != 1 || v[0] != want {
			t.Errorf("ssh -G %s = %q, want %q", k, v, want)
		}
	}
	// ssh -G leaves out a path of none (and prints the file's otherwise).
	for _, k := range []string{"controlpath", "localforward", "remoteforward", "dynamicforward"} {
		if v := got[k]; len(v) != 0 {
			t.Errorf("ssh -G %s = %q, want none", k, v)
		}
	}
}

// The ProxyCommand quotes %h: ssh hands the line to the shell after
// putting the host name in, and a name from ~/.ssh/config (Hostname) with
// shell characters must reach dial as one word. Run with the real ssh and
// shell; /bin/echo stands in for stemctl and prints what dial would get.
func TestDialCommandQuotesTheHost(t *testing.T) {
	needs.Program(t, "ssh", "openssh-client")
	dir := t.TempDir()
	kp, err := Keygen(filepath.Join(dir, "stem_k"), "k")
	if err != nil {
		t.Fatal(err)
	}
	// Glob characters match these files; $(...) would write "pwned".
	for _, f := range []string{"1", "lab1"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	// The dialer prints each argument it got in brackets as the server's
	// banner, then waits for ssh's own banner before it exits: echo alone
	// could exit before ssh wrote, and ssh then failed with a broken pipe
	// before printing the line.
	dial := filepath.Join(dir, "dial")
	if err := os.WriteFile(dial, []byte("#!/bin/sh\nprintf '[%s]' \"$@\"; echo\nhead -n 1 >/dev/null\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a$(id>pwned)", "lab[0-9]", "[::1]", "a;id>pwned", "a|id>pwned", "a&id>pwned&", "a b"} {
		cfg := filepath.Join(dir, "config")
		os.WriteFile(cfg, []byte("Host lab-03\n  Hostname \""+name+"\"\n"), 0o600)
		args, err := Target{Host: "anna@lab-03", Key: kp.PrivatePath, Dial: dial}.Command("mcp")
		if err != nil {
			t.Fatal(err)
		}
		// The dialer's line goes to ssh as the server's banner; -v shows it.
		cmd := exec.Command("ssh", append([]string{"-F", cfg, "-v", "-o", "UserKnownHostsFile=/dev/null"}, args...)...)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("Hostname %q ran a command through the ProxyCommand:\n%s", name, out)
		}
		if want := "banner line 0: [teacher][dial][" + name + "][22]"; !strings.Contains(string(out), want) {
			t.Errorf("Hostname %q: dial would not get it as one word; want %q in:\n%s", name, want, out)
		}
	}
}

// The ProxyCommand names stem-dial directly, and stemctl with its
// `teacher dial`; paths the shell would split or expand are refused.
func TestDialCommandForms(t *testing.T) {
	for path, want := range map[string]string{
		"/usr/local/bin/stem-dial":   "/usr/local/bin/stem-dial '%h' %p",
		"/usr/local/bin/stemctl":     "/usr/local/bin/stemctl teacher dial '%h' %p",
		"/opt/stem-dial/bin/stemctl": "/opt/stem-dial/bin/stemctl teacher dial '%h' %p",
	} {
		if got, err := DialCommand(path); err != nil || got != want {
			t.Errorf("DialCommand(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, bad := range []string{"/home/a b/stem-dial", "/x/$(id)/stem-dial", "/x/../stem-dial", "relative/stem-dial"} {
		if got, err := DialCommand(bad); err == nil {
			t.Errorf("DialCommand(%q) = %q, want an error", bad, got)
		}
	}
}
