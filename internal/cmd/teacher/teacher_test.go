package teacher

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/xdg"
)

type env struct {
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
	home, key   string
	self        string // stemctl's path
	vars        map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	home := t.TempDir()
	ios, _, out, errOut := iostreams.Test()
	e := &env{out: out, errOut: errOut, home: home, vars: map[string]string{"HOME": home}}
	e.f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return e.vars[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: home}, nil },
		Self:      func() (string, error) { return e.self, nil },
	}
	// Not /usr/local/bin: a stem-dial installed there would be picked as
	// the dialer instead of the stemctl under test.
	e.self = filepath.Join(t.TempDir(), "stemctl")
	kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(home, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	e.key = kp.PrivatePath
	return e
}

// proxyCommand is the ProxyCommand option an entry gets from e's stemctl.
func (e *env) proxyCommand() string {
	return "ProxyCommand=" + e.self + " teacher dial '%h' %p"
}

// newSSHEnv is newEnv for tests of commands that run `ssh -G` to read the
// teacher's ssh configuration.
func newSSHEnv(t *testing.T) *env {
	t.Helper()
	needs.Program(t, "ssh", "openssh-client")
	return newEnv(t)
}

func (e *env) run(t *testing.T, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	cmd := NewCmdTeacher(e.f)
	cmd.SetArgs(args)
	cmd.SetOut(e.out)
	cmd.SetErr(e.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func TestConfigPrintsEachProvider(t *testing.T) {
	e := newSSHEnv(t)
	wantArgs := []any{"-T", "-a", "-x", "-i", e.key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ControlPath=none",
		"-o", "PreferredAuthentications=publickey", "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no",
		"-o", "ProxyUseFdpass=no", "-o", e.proxyCommand(), "anna@lab-03", "mcp", "hazard3-sim-inf-bss-t4"}

	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab-03", "--key", e.key, "--instance", "hazard3-sim-inf-bss-t4"); err != nil {
		t.Fatal(err)
	}
	var codex map[string]map[string]map[string]any
	if _, err := toml.Decode(e.out.String(), &codex); err != nil {
		t.Fatalf("codex snippet is not TOML: %v\n%s", err, e.out.String())
	}
	entry := codex["mcp_servers"]["stem-anna"]
	if entry["command"] != "ssh" || !equalAny(entry["args"].([]any), wantArgs) {
		t.Fatalf("codex entry = %v", entry)
	}

	if err := e.run(t, "config", "--provider", "claude", "--host", "anna@lab-03", "--key", e.key, "--instance", "hazard3-sim-inf-bss-t4", "--name", "anna"); err != nil {
		t.Fatal(err)
	}
	var claude struct {
		MCPServers map[string]struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Args    []any  `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &claude); err != nil {
		t.Fatalf("claude snippet is not JSON: %v\n%s", err, e.out.String())
	}
	if c := claude.MCPServers["anna"]; c.Type != "stdio" || !equalAny(c.Args, wantArgs) {
		t.Fatalf("claude entry = %+v", c)
	}
	if !strings.Contains(e.errOut.String(), "claude mcp add --scope project anna -- ssh -T -a -x -i "+e.key) {
		t.Fatalf("no claude mcp add line:\n%s", e.errOut.String())
	}

	if err := e.run(t, "config", "--provider", "gemini", "--host", "bob@lab-04", "--key", e.key); err != nil {
		t.Fatal(err)
	}
	var gem map[string]map[string]map[string]any
	if err := json.Unmarshal(e.out.Bytes(), &gem); err != nil {
		t.Fatal(err)
	}
	if args := gem["mcpServers"]["stem-bob"]["args"].([]any); args[len(args)-1] != "mcp" {
		t.Fatalf("gemini entry without instance = %v", args)
	}
}

func TestConfigWriteMergesOneEntryPerStudent(t *testing.T) {
	e := newSSHEnv(t)
	codexHome := filepath.Join(e.home, "codexhome")
	e.vars["CODEX_HOME"] = codexHome
	cfg := filepath.Join(codexHome, "config.toml")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	orig := "# mine\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\n"
	if err := os.WriteFile(cfg, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"anna", "bob", "celina"} {
		if err := e.run(t, "config", "--provider", "codex", "--host", who+"@lab", "--key", e.key, "--write"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.out.String(), cfg) {
			t.Fatalf("did not say where it wrote: %s", e.out.String())
		}
	}
	data, _ := os.ReadFile(cfg)
	if !strings.HasPrefix(string(data), orig) {
		t.Fatalf("existing content changed:\n%s", data)
	}
	var m map[string]map[string]map[string]any
	if _, err := toml.Decode(string(data), &m); err != nil {
		t.Fatal(err)
	}
	if len(m["mcp_servers"]) != 4 {
		t.Fatalf("servers = %v", m["mcp_servers"])
	}

	// Claude, user scope: ~/.claude.json.
	if err := e.run(t, "config", "--provider", "claude", "--scope", "user", "--host", "anna@lab", "--key", e.key, "--write", "--json"); err != nil {
		t.Fatal(err)
	}
	var res struct {
		File    string `json:"file"`
		Written bool   `json:"written"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &res); err != nil || res.File != filepath.Join(e.home, ".claude.json") || !res.Written {
		t.Fatalf("json: %v %s", err, e.out.String())
	}
}

func TestConfigRefusesTheOrdinaryKeyAndBadHosts(t *testing.T) {
	e := newEnv(t)
	data, _ := os.ReadFile(e.key)
	ordinary := filepath.Join(e.home, ".ssh", "id_ed25519")
	if err := os.WriteFile(ordinary, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", ordinary); err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("ordinary key: %v", err)
	}
	for _, host := range []string{"-oProxyCommand=id", "anna@lab;id", "anna@lab mcp x"} {
		if err := e.run(t, "config", "--provider", "codex", "--host", host, "--key", e.key); err == nil {
			t.Errorf("host %q accepted", host)
		}
	}
	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", e.key, "--instance", "../x"); err == nil {
		t.Error("instance ../x accepted")
	}
	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", e.key, "--ssh-option", "ProxyCommand=id"); err == nil {
		t.Error("ProxyCommand accepted")
	}
	for _, name := range []string{"-x", "--scope", "-e"} {
		if err := e.run(t, "config", "--provider", "claude", "--host", "anna@lab", "--key", e.key, "--name", name); err == nil || e.errOut.Len() != 0 {
			t.Errorf("--name %s accepted (printed %q)", name, e.errOut.String())
		}
	}
	if err := e.run(t, "config", "--provider", "vim", "--host", "anna@lab", "--key", e.key); !cmdutil.IsFlagError(err) {
		t.Errorf("unknown provider: %v", err)
	}
}

func equalAny(got []any, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// Without --key, the one automation key keygen made in ~/.ssh is used, and
// stderr says so; other stem_ files (no .pub, a .pub without keygen's
// marker) are not automation keys.
func TestConfigDefaultsToTheOnlyAutomationKey(t *testing.T) {
	e := newSSHEnv(t)
	other := filepath.Join(e.home, ".ssh", "stem_other")
	data, _ := os.ReadFile(e.key)
	if err := os.WriteFile(other, data, 0o600); err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(e.key + ".pub")
	unmarked := strings.Replace(string(pub), "stem-automation:kowalski", "teacher@laptop", 1)
	if err := os.WriteFile(other+".pub", []byte(unmarked), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, ".ssh", "stem_lonely"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab-03", "--json"); err != nil {
		t.Fatalf("%v\n%s", err, e.errOut.String())
	}
	var res struct {
		Entry struct {
			Args []string `json:"args"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(res.Entry.Args, "-i"); i < 0 || i+1 >= len(res.Entry.Args) || res.Entry.Args[i+1] != e.key {
		t.Fatalf("entry args %v, want -i %s", res.Entry.Args, e.key)
	}
	if !strings.Contains(e.errOut.String(), "using the automation key "+e.key) {
		t.Fatalf("stderr does not say which key: %q", e.errOut.String())
	}

	// An explicit --key is used as given, without the note.
	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab-03", "--key", e.key); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.errOut.String(), "using the automation key") {
		t.Fatalf("note with an explicit --key: %q", e.errOut.String())
	}
}

func TestConfigKeyDefaultNeedsExactlyOne(t *testing.T) {
	e := newEnv(t)
	second, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(e.home, "nowak"), "nowak")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"config", "status"} {
		args := []string{cmd, "--host", "anna@lab-03"}
		if cmd == "config" {
			args = append(args, "--provider", "codex")
		}
		err := e.run(t, args...)
		if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "2 automation keys") ||
			!strings.Contains(err.Error(), "\n  "+e.key+"\n  "+second.PrivatePath) || !strings.Contains(err.Error(), "--key FILE") {
			t.Fatalf("%s with two keys: %v", cmd, err)
		}
	}

	for _, p := range []string{e.key, e.key + ".pub", second.PrivatePath, second.PublicPath} {
		os.Remove(p)
	}
	for _, cmd := range []string{"config", "status"} {
		args := []string{cmd, "--host", "anna@lab-03"}
		if cmd == "config" {
			args = append(args, "--provider", "codex")
		}
		err := e.run(t, args...)
		if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "no automation key in "+filepath.Join(e.home, ".ssh")) ||
			!strings.Contains(err.Error(), "stemctl access keygen --name NAME") {
			t.Fatalf("%s with no key: %v", cmd, err)
		}
	}
	// No ~/.ssh at all is the same answer, not a file error.
	os.RemoveAll(filepath.Join(e.home, ".ssh"))
	if err := e.run(t, "status", "--host", "anna@lab-03"); !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "no automation key") {
		t.Fatalf("no ~/.ssh: %v", err)
	}
}

// status takes the default too: it gets as far as running ssh with it.
func TestStatusDefaultsToTheOnlyAutomationKey(t *testing.T) {
	needs.Program(t, "ssh", "openssh-client")
	e := newEnv(t)
	// Nothing listens on port 1 of loopback: ssh fails at once, after the key was chosen.
	err := e.run(t, "status", "--host", "anna@127.0.0.1", "--port", "1", "--timeout", "10s")
	if err == nil || !strings.Contains(err.Error(), "ssh anna@127.0.0.1 status") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(e.errOut.String(), "using the automation key "+e.key) {
		t.Fatalf("stderr: %q", e.errOut.String())
	}
}

// --help names the key flag's value FILE (backquotes in a usage string
// become the value's name, so the text must not quote a command).
func TestKeyFlagHelp(t *testing.T) {
	e := newEnv(t)
	for _, cmd := range []string{"config", "status"} {
		if err := e.run(t, cmd, "--help"); err != nil {
			t.Fatal(err)
		}
		help := e.out.String()
		if !strings.Contains(help, "--key FILE ") || !strings.Contains(help, "--host USER@HOST ") || strings.Contains(help, "--key stemctl") {
			t.Fatalf("%s --help:\n%s", cmd, help)
		}
	}
}

// A key named by IdentityFile in ~/.ssh/config is in ordinary use: refused,
// also when it would be the default key.
func TestConfigRefusesIdentityFileKey(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.home, ".ssh", "config")
	if err := os.WriteFile(cfg, []byte("Host *.lab\n  IdentityFile ~/.ssh/stem_kowalski\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"config", "--provider", "codex", "--host", "anna@lab", "--key", e.key},
		{"config", "--provider", "codex", "--host", "anna@lab", "--key", e.key, "--force"},
		{"config", "--provider", "codex", "--host", "anna@lab"},
		{"status", "--host", "anna@lab", "--key", e.key},
	} {
		err := e.run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "IdentityFile ~/.ssh/stem_kowalski on line 2 of "+cfg) || e.out.Len() != 0 {
			t.Fatalf("%v: %v (out %q)", args, err, e.out.String())
		}
	}
}

// A key keygen did not make needs --force, which warns on stderr.
func TestConfigUnmarkedKeyNeedsForce(t *testing.T) {
	e := newSSHEnv(t)
	data, _ := os.ReadFile(e.key)
	pub, _ := os.ReadFile(e.key + ".pub")
	key := filepath.Join(e.home, "keys", "work")
	os.MkdirAll(filepath.Dir(key), 0o700)
	os.WriteFile(key, data, 0o600)
	os.WriteFile(key+".pub", []byte(strings.Replace(string(pub), "stem-automation:kowalski", "t@laptop", 1)), 0o644)

	err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", key)
	if err == nil || !strings.Contains(err.Error(), "does not look like an automation key") || !strings.Contains(err.Error(), "pass --force") || e.out.Len() != 0 {
		t.Fatalf("unmarked key: %v", err)
	}
	if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", key, "--force"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.errOut.String(), "warning: "+key+" is used although") || !strings.Contains(e.out.String(), key) {
		t.Fatalf("--force: stderr %q stdout %q", e.errOut.String(), e.out.String())
	}
}

// The entry connects through `stemctl teacher dial` unless --direct, or
// unless the teacher's ssh configuration already routes the host through
// a proxy (which must keep working); stemctl at a path the shell would
// split is refused with the way out.
func TestConfigDialProxyCommand(t *testing.T) {
	e := newSSHEnv(t)
	args := func(extra ...string) []string {
		t.Helper()
		return e.configArgs(t, append([]string{"--host", "anna@lab-03"}, extra...)...)
	}
	pc := e.proxyCommand()
	if a := args(); !slices.Contains(a, pc) {
		t.Fatalf("default entry %v lacks %s", a, pc)
	}
	if a := args("--direct"); slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "ProxyCommand=") }) {
		t.Fatalf("--direct entry %v has a ProxyCommand", a)
	}
	a := args("--ssh-option", "ProxyJump=jump.example")
	if slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "ProxyCommand=") }) || !slices.Contains(a, "ProxyJump=jump.example") {
		t.Fatalf("entry with a jump host %v", a)
	}
	if !strings.Contains(e.errOut.String(), "proxyjump jump.example") {
		t.Fatalf("no note about the jump host: %q", e.errOut.String())
	}
	for _, self := range []string{"/opt/my tools/stemctl", "/opt/100%/stemctl", "/opt/x;id/stemctl", "stemctl"} {
		e.self = self
		err := e.run(t, "config", "--provider", "gemini", "--host", "anna@lab-03", "--key", e.key)
		if err == nil || !strings.Contains(err.Error(), "--direct") {
			t.Errorf("stemctl at %q: %v", self, err)
		}
		if a := args("--direct"); slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, self) }) {
			t.Errorf("--direct with stemctl at %q: %v", self, a)
		}
	}
}

// useSSHConfig makes "ssh" for the rest of the test the real ssh reading
// config instead of the user's ~/.ssh/config (ssh finds that file through
// the password database, not $HOME, so a test cannot move it).
func useSSHConfig(t *testing.T, config string) string {
	t.Helper()
	real := needs.Program(t, "ssh", "openssh-client")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o700)
	script := "#!/bin/sh\nexec " + shellQuoteOne(real) + " -F " + shellQuoteOne(cfg) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return cfg
}

// configArgs runs teacher config --json and returns the entry's args.
func (e *env) configArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	if err := e.run(t, append([]string{"config", "--provider", "gemini", "--key", e.key, "--json"}, extra...)...); err != nil {
		t.Fatalf("%v: %v", extra, err)
	}
	var res struct {
		Entry struct {
			Args []string `json:"args"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res.Entry.Args
}

// The teacher's ssh configuration, as ssh -G resolves it (Host and Match
// blocks, keywords in any case, "none"), decides whether the entry dials:
// a proxy it names is kept; "none" is no proxy; a Hostname the ProxyCommand
// should not carry leaves dial out.
func TestConfigFollowsSSHConfig(t *testing.T) {
	e := newSSHEnv(t)
	pc := e.proxyCommand()
	hasPC := func(a []string) bool { return slices.Contains(a, pc) }
	for _, tc := range []struct {
		config string
		dial   bool
		note   string
	}{
		{"Host lab-03\n  ProxyCommand none\n", true, ""},
		{"Host lab-03\n  ProxyJump none\n", true, ""},
		{"Host lab-03\n    PROXYJUMP    jump.example\n", false, "proxyjump jump.example"},
		{"Host lab-03\n\tproxycommand=nc -X 5 %h %p\n", false, "proxycommand nc -X 5 %h %p"},
		{"Match exec \"true\"\n  ProxyJump jump.example\n", false, "proxyjump jump.example"},
		{"Match exec \"false\"\n  ProxyJump jump.example\n", true, ""},
		{"Host lab-03\n  HOSTNAME Lab03.Example\n", true, ""},
		{"Host lab-03\n  Hostname \"a'b\"\n", false, `names this host "a'b"`},
		{"Host lab-03\n  ProxyUseFdpass yes\n  ForwardAgent yes\n", true, ""},
	} {
		useSSHConfig(t, tc.config)
		a := e.configArgs(t, "--host", "anna@lab-03")
		if hasPC(a) != tc.dial {
			t.Errorf("config %q: entry %v, dial %v", tc.config, a, !tc.dial)
		}
		if tc.note != "" && !strings.Contains(e.errOut.String(), tc.note) {
			t.Errorf("config %q: no note %q in %q", tc.config, tc.note, e.errOut.String())
		}
		if tc.note == "" && e.errOut.Len() != 0 {
			t.Errorf("config %q: stderr %q", tc.config, e.errOut.String())
		}
	}
}

// An IdentityFile (or CertificateFile) the teacher's configuration gives
// the host stays in play despite IdentitiesOnly: the entry's ssh would
// offer it once the automation key is refused. config says so, naming it,
// also with --direct.
func TestConfigWarnsOfOtherIdentities(t *testing.T) {
	e := newSSHEnv(t)
	useSSHConfig(t, "Host *\n  IdentityFile ~/.ssh/id_ed25519\n  CertificateFile ~/.ssh/id_ed25519-cert.pub\n")
	for _, direct := range []bool{false, true} {
		args := []string{"--host", "anna@lab-03"}
		if direct {
			args = append(args, "--direct")
		}
		e.configArgs(t, args...)
		w := e.errOut.String()
		if !strings.Contains(w, "warning: your ssh configuration also gives this host ~/.ssh/id_ed25519, ~/.ssh/id_ed25519-cert.pub") || !strings.Contains(w, "Host * !lab-03") {
			t.Errorf("direct %v: stderr %q", direct, w)
		}
	}
	useSSHConfig(t, "Host other\n  IdentityFile ~/.ssh/id_ed25519\n")
	e.configArgs(t, "--host", "anna@lab-03")
	if e.errOut.Len() != 0 {
		t.Errorf("IdentityFile for another host: stderr %q", e.errOut.String())
	}
}

// --ssh-option cannot carry a command, another key or an option that
// undoes the entry's; ProxyJump=none keeps dial (and ssh still uses it);
// an IPv6 host in brackets is written bare.
func TestConfigSSHOptionsAndHosts(t *testing.T) {
	e := newSSHEnv(t)
	useSSHConfig(t, "")
	for _, o := range []string{"Hostname=a$(id>pwned)", "IdentityFile2=/root/.ssh/id_ed25519", "SmartcardDevice=/tmp/x.so",
		"KnownHostsCommand=/bin/id", "ForwardAgent=yes", "ProxyUseFdpass=yes", "PreferredAuthentications=password"} {
		err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab", "--key", e.key, "--ssh-option", o)
		if err == nil || !strings.Contains(err.Error(), o) || e.out.Len() != 0 {
			t.Errorf("--ssh-option %s: %v, out %q", o, err, e.out.String())
		}
	}
	a := e.configArgs(t, "--host", "anna@lab-03", "--ssh-option", "ProxyJump=none")
	if !slices.Contains(a, e.proxyCommand()) {
		t.Fatalf("ProxyJump=none: %v", a)
	}
	out, err := exec.Command("ssh", append([]string{"-G"}, a...)...).Output()
	if err != nil || !strings.Contains(string(out), "\nproxycommand "+e.self+" teacher dial '%h' %p\n") || strings.Contains(string(out), "proxyjump") {
		t.Fatalf("ssh -G of the ProxyJump=none entry: %v\n%s", err, out)
	}
	for host, want := range map[string]string{"anna@[::1]": "anna@::1", "anna@::1": "anna@::1", "anna@fe80::1%eth0": "anna@fe80::1%eth0"} {
		a := e.configArgs(t, "--host", host)
		if a[len(a)-2] != want {
			t.Errorf("--host %s: entry %v", host, a)
		}
	}
}

// An entry written by a `go run` build names a path that will be gone: the
// teacher is told so; an installed stemctl gets no such warning.
func TestConfigWarnsOfTemporaryBuild(t *testing.T) {
	e := newSSHEnv(t)
	for self, warned := range map[string]bool{
		"/usr/local/bin/stemctl":               false,
		"/tmp/go-build123456/b001/exe/stemctl": true,
		"/root/.cache/go-build/ab/exe/stemctl": true,
		"/tmp/stem-test-bin1/stemctl":          false,
	} {
		e.self = self
		if err := e.run(t, "config", "--provider", "codex", "--host", "anna@lab-03", "--key", e.key); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(e.errOut.String(), "a temporary build"); got != warned {
			t.Errorf("stemctl at %s: warned %v, want %v:\n%s", self, got, warned, e.errOut.String())
		}
	}
}

// Default names come from the user part alone: the same account name on
// two machines must not silently replace the first student's entry.
func TestConfigWriteRefusesToReplaceAnotherStudent(t *testing.T) {
	for _, prov := range []string{"codex", "claude", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			e := newSSHEnv(t)
			e.vars["CODEX_HOME"] = filepath.Join(e.home, "codexhome")
			file := filepath.Join(e.home, "cfg-"+prov)
			write := func(host string, extra ...string) error {
				return e.run(t, append([]string{"config", "--provider", prov, "--host", host, "--key", e.key, "--file", file, "--write"}, extra...)...)
			}
			if err := write("student@lab-03"); err != nil {
				t.Fatal(err)
			}
			first, _ := os.ReadFile(file)
			// The same student again (another instance) updates the entry.
			if err := write("student@lab-03", "--instance", "native-amd64-demo-hello-t1"); err != nil {
				t.Fatalf("same student refused: %v", err)
			}
			updated, _ := os.ReadFile(file)
			if bytes.Equal(first, updated) || !bytes.Contains(updated, []byte("native-amd64-demo-hello-t1")) {
				t.Fatalf("entry not updated:\n%s", updated)
			}
			// Another machine, same account name: refused, file unchanged.
			err := write("student@lab-04")
			if err == nil || !strings.Contains(err.Error(), `"stem-student" already reaches student@lab-03, not student@lab-04`) ||
				!strings.Contains(err.Error(), "--name stem-student-lab-04") || !strings.Contains(err.Error(), "--replace") {
				t.Fatalf("another student's entry: %v", err)
			}
			if now, _ := os.ReadFile(file); !bytes.Equal(now, updated) {
				t.Fatalf("refused write changed the file:\n%s", now)
			}
			// Another port is another account too.
			if err := write("student@lab-03", "--port", "2222"); err == nil {
				t.Fatal("a different port replaced the entry")
			}
			// The suggested name works and keeps both; --replace overwrites.
			if err := write("student@lab-04", "--name", "stem-student-lab-04"); err != nil {
				t.Fatal(err)
			}
			if err := write("student@lab-05", "--replace"); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(file)
			for _, want := range []string{"student@lab-04", "student@lab-05"} {
				if !bytes.Contains(data, []byte(want)) {
					t.Errorf("%s missing:\n%s", want, data)
				}
			}
			if bytes.Contains(data, []byte("student@lab-03")) {
				t.Errorf("--replace kept the old entry:\n%s", data)
			}
		})
	}
}

// An entry of that name that is not stem's (another tool's server) is not
// overwritten without --replace either.
func TestConfigWriteRefusesToReplaceForeignEntry(t *testing.T) {
	e := newSSHEnv(t)
	file := filepath.Join(e.home, "settings.json")
	orig := `{"mcpServers": {"stem-anna": {"command": "npx", "args": ["docs-server"]}}}` + "\n"
	if err := os.WriteFile(file, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	err := e.run(t, "config", "--provider", "gemini", "--host", "anna@lab", "--key", e.key, "--file", file, "--write")
	if err == nil || !strings.Contains(err.Error(), "something else (npx docs-server)") {
		t.Fatalf("foreign entry: %v", err)
	}
	if now, _ := os.ReadFile(file); string(now) != orig {
		t.Fatalf("file changed:\n%s", now)
	}
}
