// Package teacherkey is the teacher's side of SSH access: the automation
// keys a teacher's agent uses, the checks that such a key opens nothing but
// a student's gate, and the ssh command line that reaches a student.
package teacherkey

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// KeyPair is a generated automation key.
type KeyPair struct {
	PrivatePath string `json:"private_key"`
	PublicPath  string `json:"public_key_file"`
	PublicLine  string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
}

// AutomationMarker starts the comment Keygen writes into the .pub
// ("stem-automation:NAME"): it tells an automation key from any other.
const AutomationMarker = "stem-automation:"

// keyNameRE is a key's name: it becomes part of a file name in ~/.ssh and
// of the .pub comment.
var keyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// keyPrefix starts the file names Keygen uses by default in ~/.ssh.
const keyPrefix = "stem_"

// DefaultKeyPath is where keygen puts the automation key of name.
func DefaultKeyPath(home, name string) string {
	return filepath.Join(home, ".ssh", keyPrefix+name)
}

// FindAutomationKeys lists, sorted, the private keys in home/.ssh that
// `stemctl access keygen` made there: files stem_NAME whose stem_NAME.pub
// carries AutomationMarker. Keys kept elsewhere (keygen --out) are not
// found; name them with --key.
func FindAutomationKeys(home string) ([]string, error) {
	dir := filepath.Join(home, ".ssh")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for automation keys: %w", err)
	}
	var keys []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, keyPrefix) || strings.HasSuffix(n, ".pub") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, n)
		if pk, err := readPub(p + ".pub"); err == nil && strings.HasPrefix(pk.comment, AutomationMarker) {
			keys = append(keys, p)
		}
	}
	return keys, nil
}

type pubFile struct {
	key     ssh.PublicKey
	comment string
}

// readPub parses a .pub file: one authorized_keys-style line.
func readPub(path string) (pubFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return pubFile{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return pubFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	key, comment, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return pubFile{}, fmt.Errorf("%s is not a public key line: %w", path, err)
	}
	return pubFile{key, comment}, nil
}

// Keygen writes a new ed25519 key pair: the private key (OpenSSH format,
// unencrypted so an agent's ssh can use it with BatchMode) at path with
// mode 0600 and the public line at path.pub. It never overwrites.
func Keygen(path, name string) (KeyPair, error) {
	if len(name) > 64 || !keyNameRE.MatchString(name) {
		return KeyPair{}, fmt.Errorf("invalid key name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	pub := path + ".pub"
	for _, p := range []string{path, pub} {
		if _, err := os.Lstat(p); err == nil {
			return KeyPair{}, fmt.Errorf("%s already exists: keep using it, or remove it (and revoke its grants) before making a new one", p)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return KeyPair{}, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate ed25519 key: %w", err)
	}
	comment := AutomationMarker + name
	block, err := ssh.MarshalPrivateKey(sk, comment)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encode private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pk)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encode public key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment
	if err := writeNew(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return KeyPair{}, err
	}
	if err := writeNew(pub, []byte(line+"\n"), 0o644); err != nil {
		os.Remove(path)
		return KeyPair{}, err
	}
	return KeyPair{PrivatePath: path, PublicPath: pub, PublicLine: line, Fingerprint: ssh.FingerprintSHA256(sshPub)}, nil
}

// writeNew creates path exclusively with mode (umask cannot widen it).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// Target is how a teacher's agent reaches one student's gate.
type Target struct {
	Host       string   // USER@HOST (or HOST)
	Key        string   // the automation private key
	Port       int      // 0: ssh's default
	SSHOptions []string // extra -o KEY=VALUE options
	// Dial is the absolute path of stemctl: when set, ssh connects through
	// `stemctl teacher dial` (package tcprelay), which removes the
	// handshake's delayed-ACK stalls.
	Dial string
}

// dialPathRE is what may appear unquoted in the ProxyCommand ssh hands to
// the teacher's shell (and free of ssh's % tokens).
var dialPathRE = regexp.MustCompile(`^/[A-Za-z0-9._/+-]+$`)

// DialBinary is the small program that does what `stemctl teacher dial`
// does without stemctl's start-up cost (ssh starts one per connection);
// it is installed beside stemctl.
const DialBinary = "stem-dial"

// DialCommand is the ProxyCommand for the dialer at path: stem-dial, or
// stemctl (its `teacher dial`). ssh puts the host name (after
// ~/.ssh/config's Hostname) where %h stands and hands the line to the
// shell, so %h is single-quoted: a name with glob or shell characters
// reaches the dialer as one word and runs nothing.
func DialCommand(path string) (string, error) {
	if !dialPathRE.MatchString(path) || strings.Contains(path, "/../") {
		return "", fmt.Errorf("path %q cannot go into ssh's ProxyCommand unquoted: install stemctl and stem-dial under a plain path (letters, digits, . _ / + -) or connect with --direct", path)
	}
	if filepath.Base(path) == DialBinary {
		return path + " '%h' %p", nil
	}
	return path + " teacher dial '%h' %p", nil
}

var (
	// [USER@]HOST; validHost also bounds the parts (64 and 255 bytes). An
	// IPv6 address is written bare (anna@::1, fe80::1%eth0); Command takes
	// the brackets off [::1], which ssh would try to resolve as a name.
	hostRE      = regexp.MustCompile(`^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9_:][A-Za-z0-9._:%-]*$`)
	sshOptRE    = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*)=(.+)$`)
	sshOptValRE = regexp.MustCompile(`^[A-Za-z0-9._/:@%,+~^=-]+$`)
	// ProxyJump may name an IPv6 jump host as [addr]:port; ssh checks the
	// names itself and quotes the one it hands to the shell.
	proxyJumpValRE = regexp.MustCompile(`^[A-Za-z0-9._/:@%,+~\[\]-]+$`)
)

// sshOptionsAllowed are the ssh options --ssh-option may set: where and how
// to connect and how to check the host key. Anything else is refused,
// because ssh has options (and aliases of them, such as IdentityFile2) that
// run commands (KnownHostsCommand, LocalCommand), load code
// (PKCS11Provider, SecurityKeyProvider), offer other keys or credentials
// (CertificateFile, IdentityAgent, GSSAPI, host-based), forward the
// teacher's agent, X display or ports to the student's machine, or undo
// the options Command sets.
var sshOptionsAllowed = map[string]bool{
	"addressfamily": true, "bindaddress": true, "bindinterface": true,
	"canonicaldomains": true, "canonicalizefallbacklocal": true, "canonicalizehostname": true, "canonicalizemaxdots": true,
	"casignaturealgorithms": true, "checkhostip": true, "ciphers": true, "compression": true,
	"connectionattempts": true, "connecttimeout": true, "fingerprinthash": true,
	"globalknownhostsfile": true, "hashknownhosts": true, "hostkeyalgorithms": true, "hostkeyalias": true,
	"hostname": true, "ipqos": true, "kexalgorithms": true, "loglevel": true, "macs": true,
	"port": true, "proxyjump": true, "pubkeyacceptedalgorithms": true, "pubkeyacceptedkeytypes": true,
	"rekeylimit": true, "requiredrsasize": true, "serveralivecountmax": true, "serveraliveinterval": true,
	"stricthostkeychecking": true, "tcpkeepalive": true, "updatehostkeys": true, "user": true,
	"userknownhostsfile": true, "verifyhostkeydns": true,
}

// SSHOptionsAllowed lists, sorted, the options --ssh-option may set.
func SSHOptionsAllowed() []string {
	var names []string
	for n := range sshOptionsAllowed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkSSHOption vets one --ssh-option KEY=VALUE.
func checkSSHOption(o string) error {
	m := sshOptRE.FindStringSubmatch(o)
	if m == nil {
		return fmt.Errorf("invalid ssh option %q: use KEY=VALUE, for example UserKnownHostsFile=/path", o)
	}
	key := strings.ToLower(m[1])
	if !sshOptionsAllowed[key] {
		return fmt.Errorf("ssh option %q is not allowed here: stem sets what the automation connection needs, and other options could run commands, use another key or credential, forward your agent or ports to the student's machine, or undo those settings (allowed: %s)", o, strings.Join(SSHOptionsAllowed(), ", "))
	}
	re := sshOptValRE
	if key == "proxyjump" {
		re = proxyJumpValRE
	}
	if !re.MatchString(m[2]) {
		return fmt.Errorf("invalid ssh option %q: the value may hold letters, digits and . _ / : @ %% , + ~ ^ = - only (ssh hands some values to the shell, as %%h in a ProxyCommand)", o)
	}
	return nil
}

// defaultIdentities are the files ssh offers by default: by convention the
// teacher's ordinary key, which must never go into an MCP configuration.
var defaultIdentities = map[string]bool{
	"id_rsa": true, "id_ecdsa": true, "id_ecdsa_sk": true, "id_ed25519": true,
	"id_ed25519_sk": true, "id_dsa": true, "id_xmss": true,
}

// KeyCheck is what CheckKeyFile needs besides the key's path.
type KeyCheck struct {
	// Home is the teacher's home directory: IdentityFile lines in its
	// .ssh/config name keys in ordinary use. Empty skips that check.
	Home string
	// SSHHome is the home directory ssh itself reads .ssh/config from (the
	// passwd entry's, whatever $HOME says), checked too when it differs.
	SSHHome string
	// Force accepts, with a warning, a key whose .pub does not carry the
	// marker `stemctl access keygen` writes (an automation key made some
	// other way). It does not lift the other refusals.
	Force bool
}

// CheckKeyFile vets the private key an MCP configuration will name. The
// teacher's ordinary key (a full shell on the student's account) must never
// go there, and stem cannot tell keys apart by their bits, so it refuses:
//
//   - ssh's default identity files (id_ed25519, ...), by name, also when the
//     path is a symlink to one;
//   - a key named by an IdentityFile line of ~/.ssh/config (a key ssh uses
//     for ordinary logins; the MCP entry passes the key with -i and needs no
//     such line);
//   - a key whose .pub is missing, does not match it, or does not carry
//     keygen's "stem-automation:" comment, unless kc.Force (then a warning);
//   - files others can read (ssh would refuse them), and anything that is
//     not a private key.
//
// warns is advice that does not stop the configuration.
func CheckKeyFile(path string, kc KeyCheck) (abs string, warns []string, err error) {
	abs, err = filepath.Abs(path)
	if err != nil {
		return "", nil, fmt.Errorf("key path %s: %w", path, err)
	}
	ordinary := func(p string) error {
		return fmt.Errorf("%s is one of ssh's default identities, normally the teacher's ordinary key with a full shell; it must never be put in an MCP configuration: make a separate automation key with `stemctl access keygen --name NAME` and have the student grant its .pub", p)
	}
	if defaultIdentities[filepath.Base(abs)] {
		return "", nil, ordinary(abs)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", nil, fmt.Errorf("automation key %s: %w (make one with `stemctl access keygen --name NAME`)", abs, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", nil, fmt.Errorf("automation key %s: %w", abs, err)
	}
	if defaultIdentities[filepath.Base(real)] {
		return "", nil, ordinary(abs + " (-> " + real + ")")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", nil, fmt.Errorf("automation key %s has mode %v; ssh refuses private keys others can read: chmod 600 %s", abs, fi.Mode().Perm(), abs)
	}
	for i, home := range []string{kc.Home, kc.SSHHome} {
		if home == "" || i == 1 && filepath.Clean(home) == filepath.Clean(kc.Home) {
			continue
		}
		cfg, ids, err := sshConfigIdentities(home)
		if err != nil {
			return "", nil, err
		}
		for _, id := range ids {
			if id.names(abs, real) {
				return "", nil, fmt.Errorf("%s is named by IdentityFile %s on line %d of %s: ssh uses it for your ordinary logins, so it is taken to be your ordinary key and must not go into an MCP configuration; use an automation key from `stemctl access keygen --name NAME` (if this one is such a key, remove that IdentityFile line: the MCP entry passes the key with -i)", abs, id.Value, id.Line, cfg)
			}
		}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return "", nil, fmt.Errorf("read automation key: %w", err)
	}
	var pub ssh.PublicKey
	if signer, err := ssh.ParsePrivateKey(data); err == nil {
		pub = signer.PublicKey()
	} else {
		var pe *ssh.PassphraseMissingError
		if !errors.As(err, &pe) {
			return "", nil, fmt.Errorf("%s is not an SSH private key (%v): give the private half of the automation key, not the .pub", abs, err)
		}
		pub = pe.PublicKey // nil for PEM keys, which keep it encrypted
		warns = append(warns, fmt.Sprintf("%s is passphrase-protected; with BatchMode ssh cannot ask for it, so it must be loaded in ssh-agent whenever the agent CLI runs", abs))
	}
	if why := markerProblem(abs, pub); why != "" {
		if !kc.Force {
			return "", nil, fmt.Errorf("%s does not look like an automation key: %s; `stemctl access keygen --name NAME` makes one (its .pub comment is %sNAME). If you are sure this key opens nothing but the student's gate, pass --force", abs, why, AutomationMarker)
		}
		warns = append(warns, fmt.Sprintf("%s is used although %s (--force): make sure it is not your ordinary key, which would give the agent a shell on the student's account", abs, why))
	}
	return abs, warns, nil
}

// markerProblem says why the .pub beside key does not vouch for it, or "".
func markerProblem(key string, pub ssh.PublicKey) string {
	pf, err := readPub(key + ".pub")
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "there is no " + filepath.Base(key) + ".pub beside it"
	case err != nil:
		return err.Error()
	case pub != nil && !bytes.Equal(pf.key.Marshal(), pub.Marshal()):
		return "its .pub holds a different key"
	case !strings.HasPrefix(pf.comment, AutomationMarker):
		return fmt.Sprintf("its .pub comment %q lacks the %s marker", pf.comment, AutomationMarker)
	}
	return ""
}

// Command returns the ssh argv (without "ssh") that runs verb on the
// student's gate. Options given first win over ~/.ssh/config, so these
// hold whatever the teacher's configuration says for the host:
//
//   - IdentitiesOnly keeps ssh from offering other keys (an agent's or the
//     default identities, which may be the teacher's ordinary key and would
//     get a shell), and PreferredAuthentications=publickey from logging in
//     with other credentials (Kerberos/GSSAPI, host-based);
//   - ControlPath=none keeps it from reusing a multiplexed connection
//     someone opened with such a key;
//   - -a, -x and ClearAllForwardings keep the teacher's ssh-agent, X
//     display and ports away from the student's machine (the student runs
//     that sshd; the key's restrict line is theirs to change), and
//     PermitLocalCommand=no keeps a LocalCommand from running;
//   - with Dial, ProxyUseFdpass=no keeps a ProxyUseFdpass line from
//     expecting a file descriptor dial does not pass.
func (t Target) Command(verb ...string) ([]string, error) {
	host := unbracket(t.Host)
	if !validHost(host) || strings.HasPrefix(host, "-") {
		return nil, fmt.Errorf("invalid --host %q: use USER@HOST (the student's account on the student's machine; an IPv6 address as USER@::1)", t.Host)
	}
	if !filepath.IsAbs(t.Key) {
		return nil, fmt.Errorf("key path %q must be absolute (MCP clients start ssh from any directory)", t.Key)
	}
	// ssh checks that -i's file exists as written, then loads the file
	// named by expanding % tokens and ${VAR} in it: stem_%u would be vetted
	// and stem_anna used.
	if strings.Contains(t.Key, "%") || strings.Contains(t.Key, "${") {
		return nil, fmt.Errorf("key path %q has %% or ${, which ssh expands, so it would use another file than the one checked: rename the key or its directory", t.Key)
	}
	args := []string{"-T", "-a", "-x", "-i", t.Key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ControlPath=none",
		"-o", "PreferredAuthentications=publickey", "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no"}
	if t.Port != 0 {
		if t.Port < 1 || t.Port > 65535 {
			return nil, fmt.Errorf("invalid port %d", t.Port)
		}
		args = append(args, "-p", strconv.Itoa(t.Port))
	}
	for _, o := range t.SSHOptions {
		if err := checkSSHOption(o); err != nil {
			return nil, err
		}
		args = append(args, "-o", o)
	}
	if t.Dial != "" {
		pc, err := DialCommand(t.Dial)
		if err != nil {
			return nil, err
		}
		args = append(args, "-o", "ProxyUseFdpass=no", "-o", "ProxyCommand="+pc)
	}
	args = append(args, host)
	return append(args, verb...), nil
}

// unbracket turns [USER@][ADDR] into [USER@]ADDR.
func unbracket(s string) string {
	i := strings.LastIndexByte(s, '@') + 1
	if h := s[i:]; len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return s[:i] + h[1:len(h)-1]
	}
	return s
}

func validHost(s string) bool {
	user, host, ok := strings.Cut(s, "@")
	if !ok {
		user, host = "", s
	}
	return len(user) <= 64 && len(host) <= 255 && hostRE.MatchString(s)
}
