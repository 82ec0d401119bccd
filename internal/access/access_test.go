package access

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/levels"
)

func newKey(t *testing.T) (ssh.PublicKey, string) {
	t.Helper()
	pk, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return pub, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " teacher@laptop"
}

type fixture struct {
	m     *Manager
	keys  string
	dir   string
	audit *audit.Log
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, err := OpenStore(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "ssh", "authorized_keys")
	return &fixture{
		dir: dir, keys: keys, audit: log,
		m: &Manager{
			Store: store, AuthorizedKeys: keys, MCPBinary: fakeMCP(t, dir),
			ConfigDirArg: filepath.Join(dir, "config"),
			Env:          map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "STEM_STATE_DIR": filepath.Join(dir, "state")},
			Audit:        log, Account: "anna",
		},
	}
}

// fakeMCP is an executable named stem-mcp (check wants the program to exist).
func fakeMCP(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "bin", "stem-mcp")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) write(t *testing.T, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(f.keys), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.keys, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.keys, mode); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(f.keys)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestGrantAppendsRestrictedLineAndKeepsTheRest(t *testing.T) {
	f := newFixture(t)
	_, ordinary := newKey(t)
	// Odd but valid content: CRLF, comments, options, no final newline.
	before := "# my keys\r\n" + ordinary + "\r\n\n" + `no-pty,from="10.0.0.1" ` + mustLine(t) + " backup"
	f.write(t, before, 0o640)
	pub, line := newKey(t)
	exp := time.Date(2031, 6, 30, 18, 0, 0, 0, time.UTC)
	g, err := f.m.Grant(context.Background(), GrantRequest{
		Name: "kowalski", PublicKey: line, Level: levels.Observe.String(), Instances: []string{"hazard3-sim-inf-bss-t4", "hazard3-sim-inf-bss-t4"},
		From: "192.168.1.0/24,*.lab.example", Expires: exp,
	})
	if err != nil {
		t.Fatal(err)
	}
	after := f.read(t)
	if !strings.HasPrefix(after, before+"\n") {
		t.Fatalf("existing lines changed:\n%q\n%q", before, after)
	}
	added := strings.TrimSuffix(strings.TrimPrefix(after, before+"\n"), "\n")
	want := fmt.Sprintf(`restrict,command="%s gate --grant %s --config-dir %s",from="192.168.1.0/24,*.lab.example",expiry-time="20310630180000Z" %s stem-grant:kowalski`,
		f.m.MCPBinary, g.ID, filepath.Join(f.dir, "config"), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))))
	if added != want {
		t.Fatalf("line\n got %s\nwant %s", added, want)
	}
	if fi, _ := os.Stat(f.keys); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode not kept: %v", fi.Mode())
	}
	if len(g.Instances) != 1 || g.Level != levels.Observe.String() || g.KeyFP != ssh.FingerprintSHA256(pub) {
		t.Fatalf("grant = %+v", g)
	}
	st, err := f.m.Store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Grants[g.ID].Level != levels.Observe.String() || st.Env["XDG_RUNTIME_DIR"] != "/run/user/1000" {
		t.Fatalf("store = %+v", st)
	}
	if fi, _ := os.Stat(f.m.Store.Path()); fi.Mode().Perm() != 0o600 {
		t.Fatalf("grants file mode %v", fi.Mode())
	}
	entries, _ := f.audit.Read(audit.Filter{Event: audit.Grant})
	if len(entries) != 1 || entries[0].Grant != g.Label() || entries[0].KeyFP != g.KeyFP || entries[0].Account != "anna" {
		t.Fatalf("audit = %+v", entries)
	}
	rep, err := f.m.Check(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("check after grant: %+v %v", rep, err)
	}
}

func passwdHome(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.HomeDir
}

func mustLine(t *testing.T) string {
	_, l := newKey(t)
	return strings.TrimSuffix(l, " teacher@laptop")
}

func TestNewFileIsPrivate(t *testing.T) {
	f := newFixture(t)
	_, line := newKey(t)
	if _, err := f.m.Grant(context.Background(), GrantRequest{Name: "t", PublicKey: line, Level: levels.Full.String()}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(f.keys)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new authorized_keys: %v %v", fi, err)
	}
	if d, _ := os.Stat(filepath.Dir(f.keys)); d.Mode().Perm() != 0o700 {
		t.Fatalf(".ssh mode %v", d.Mode())
	}
}

func TestGrantRefusesTheOrdinaryKey(t *testing.T) {
	f := newFixture(t)
	_, line := newKey(t)
	f.write(t, line+"\n", 0o600)
	_, err := f.m.Grant(context.Background(), GrantRequest{Name: "t", PublicKey: line, Level: levels.Observe.String()})
	if err == nil || !strings.Contains(err.Error(), "shell") || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "keygen") {
		t.Fatalf("err = %v", err)
	}
	// restrict alone still runs any command: also a shell.
	f.write(t, "restrict "+line+"\n", 0o600)
	if _, err := f.m.Grant(context.Background(), GrantRequest{Name: "t", PublicKey: line, Level: levels.Observe.String()}); err == nil {
		t.Fatal("granted a key that has a restrict-only (shell) line")
	}
	f.write(t, `command="/bin/backup" `+line+"\n", 0o600)
	if _, err := f.m.Grant(context.Background(), GrantRequest{Name: "t", PublicKey: line, Level: levels.Observe.String()}); err == nil || !strings.Contains(err.Error(), "another forced command") {
		t.Fatalf("err = %v", err)
	}
	if got := f.read(t); got != `command="/bin/backup" `+line+"\n" {
		t.Fatalf("file changed on refusal: %q", got)
	}
	st, _ := f.m.Store.Load(context.Background())
	if len(st.Grants) != 0 {
		t.Fatalf("grant stored on refusal: %v", st.Grants)
	}
}

func TestGrantValidation(t *testing.T) {
	f := newFixture(t)
	_, line := newKey(t)
	ctx := context.Background()
	priv := "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
	cases := map[string]GrantRequest{
		"level":         {Name: "t", PublicKey: line, Level: "admin"},
		"name":          {Name: "-rf", PublicKey: line, Level: levels.Observe.String()},
		"instance dots": {Name: "t", PublicKey: line, Level: levels.Observe.String(), Instances: []string{"../x"}},
		"instance meta": {Name: "t", PublicKey: line, Level: levels.Observe.String(), Instances: []string{"a;id"}},
		"from quote":    {Name: "t", PublicKey: line, Level: levels.Observe.String(), From: `1.2.3.4",command="sh`},
		"past":          {Name: "t", PublicKey: line, Level: levels.Observe.String(), Expires: time.Now().Add(-time.Minute)},
		"private":       {Name: "t", PublicKey: priv, Level: levels.Observe.String()},
		"options":       {Name: "t", PublicKey: "no-pty " + line, Level: levels.Observe.String()},
		"two keys":      {Name: "t", PublicKey: line + "\n" + line, Level: levels.Observe.String()},
		"garbage":       {Name: "t", PublicKey: "hello", Level: levels.Observe.String()},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := f.m.Grant(ctx, req); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := os.Stat(f.keys); err == nil {
		t.Fatal("authorized_keys written by a refused grant")
	}
	bad := *f.m
	bad.MCPBinary = "/opt/my tools/stem-mcp"
	if _, err := bad.Grant(ctx, GrantRequest{Name: "t", PublicKey: line, Level: levels.Observe.String()}); err == nil {
		t.Fatal("accepted a stem-mcp path the shell would split")
	}
}

func TestOneKeyOneGrantAndUniqueNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, a := newKey(t)
	_, b := newKey(t)
	if _, err := f.m.Grant(ctx, GrantRequest{Name: "t1", PublicKey: a, Level: levels.Observe.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Grant(ctx, GrantRequest{Name: "t2", PublicKey: a, Level: levels.Full.String()}); err == nil {
		t.Fatal("same key granted twice")
	}
	if _, err := f.m.Grant(ctx, GrantRequest{Name: "t1", PublicKey: b, Level: levels.Full.String()}); err == nil {
		t.Fatal("same name granted twice")
	}
}

func TestMalformedFileIsNeverRewritten(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, a := newKey(t)
	if _, err := f.m.Grant(ctx, GrantRequest{Name: "t1", PublicKey: a, Level: levels.Observe.String()}); err != nil {
		t.Fatal(err)
	}
	broken := f.read(t) + "ssh-ed25519 AAAA-not-base64 half a line\n"
	f.write(t, broken, 0o600)
	_, b := newKey(t)
	_, err := f.m.Grant(ctx, GrantRequest{Name: "t2", PublicKey: b, Level: levels.Observe.String()})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("grant into a malformed file: %v", err)
	}
	// Revoke still takes the grant away (so the gate refuses the key) but
	// leaves the file alone and says so.
	if _, _, err := f.m.Revoke(ctx, "t1"); err == nil || !strings.Contains(err.Error(), "is revoked") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("revoke with a malformed file: %v", err)
	}
	if f.read(t) != broken {
		t.Fatal("malformed file changed")
	}
	if st, _ := f.m.Store.Load(ctx); len(st.Grants) != 0 {
		t.Fatalf("grant survived the revoke: %v", st.Grants)
	}
	rep, err := f.m.Check(ctx)
	if err != nil || len(rep.Problems) != 2 || !strings.Contains(rep.Problems[0].String(), ":1: forces grant") || !strings.Contains(rep.Problems[1].String(), ":2: not a key line") {
		t.Fatalf("check: %+v %v", rep, err)
	}
}

func TestRevokeRemovesOnlyItsLine(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, ordinary := newKey(t)
	head := "# keep me\n" + ordinary + "\n"
	f.write(t, head, 0o644)
	_, a := newKey(t)
	_, b := newKey(t)
	ga, err := f.m.Grant(ctx, GrantRequest{Name: "ta", PublicKey: a, Level: levels.Observe.String()})
	if err != nil {
		t.Fatal(err)
	}
	withA := f.read(t)
	f.write(t, withA+"# tail comment\n", 0o644)
	gb, err := f.m.Grant(ctx, GrantRequest{Name: "tb", PublicKey: b, Level: levels.Full.String()})
	if err != nil {
		t.Fatal(err)
	}
	full := f.read(t)
	lineB := strings.TrimPrefix(full, withA+"# tail comment\n")

	g, n, err := f.m.Revoke(ctx, "ta")
	if err != nil || n != 1 || g.ID != ga.ID {
		t.Fatalf("revoke: %v %d %v", g, n, err)
	}
	if got := f.read(t); got != head+"# tail comment\n"+lineB {
		t.Fatalf("after revoke:\n%q\nwant\n%q", got, head+"# tail comment\n"+lineB)
	}
	if fi, _ := os.Stat(f.keys); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, _, err := f.m.Revoke(ctx, gb.ID); err != nil { // by ID
		t.Fatal(err)
	}
	if got := f.read(t); got != head+"# tail comment\n" {
		t.Fatalf("after second revoke: %q", got)
	}
	if _, _, err := f.m.Revoke(ctx, "ta"); err == nil {
		t.Fatal("revoked an unknown grant")
	}
	entries, _ := f.audit.Read(audit.Filter{Event: audit.Revoke})
	if len(entries) != 2 {
		t.Fatalf("revoke audit entries: %d", len(entries))
	}
}

func TestSymlinkedAuthorizedKeysStaysALink(t *testing.T) {
	f := newFixture(t)
	target := filepath.Join(f.dir, "dotfiles", "authorized_keys")
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(f.keys), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, f.keys); err != nil {
		t.Fatal(err)
	}
	_, a := newKey(t)
	if _, err := f.m.Grant(context.Background(), GrantRequest{Name: "t", PublicKey: a, Level: levels.Observe.String()}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(f.keys); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("symlink replaced by a file")
	}
	if data, _ := os.ReadFile(target); !strings.Contains(string(data), "stem-grant:t") {
		t.Fatal("target not edited")
	}
}

func TestCheckFindsInconsistencies(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, a := newKey(t)
	_, b := newKey(t)
	_, c := newKey(t)
	ga, err := f.m.Grant(ctx, GrantRequest{Name: "ta", PublicKey: a, Level: levels.Observe.String()})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := f.m.Grant(ctx, GrantRequest{Name: "tb", PublicKey: b, Level: levels.Observe.String()})
	if err != nil {
		t.Fatal(err)
	}
	content := f.read(t)
	lines := strings.Split(strings.TrimSpace(content), "\n")
	// Hand edits: tb's line loses restrict; an orphan line for a revoked
	// ID; c's key copied onto ta's forced command; a's key also as a shell.
	lines[1] = strings.Replace(lines[1], "restrict,", "", 1)
	orphan := fmt.Sprintf(`restrict,command="%s gate --grant g00000000deadbeef" %s`, f.m.MCPBinary, c)
	stolen := strings.Replace(lines[0], strings.Fields(a)[1], strings.Fields(c)[1], 1)
	f.write(t, strings.Join(append(lines, orphan, stolen, a), "\n")+"\n", 0o600)
	// And the store gets a second grant for b's key (hand-edited).
	if err := f.m.Store.Update(ctx, func(st *State) error {
		dup := st.Grants[gb.ID]
		dup.ID, dup.Name = "g1111111111111111", "tb-copy"
		st.Grants[dup.ID] = dup
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// And stem-mcp went away.
	if err := os.Remove(f.m.MCPBinary); err != nil {
		t.Fatal(err)
	}
	rep, err := f.m.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := ""
	for _, p := range rep.Problems {
		all += p.String() + "\n"
	}
	for _, want := range []string{
		"grant tb: the line lacks `restrict`",
		"forces grant g00000000deadbeef, which does not exist",
		"is not the granted key",
		"grant ta: the grant's automation key also logs in here without a forced command",
		"has 2 grants (tb, tb-copy)",
		"grant tb-copy: no authorized_keys line",
		"grant ta: the forced command's program " + f.m.MCPBinary + " is missing",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("check did not report %q; got:\n%s", want, all)
		}
	}
	_ = ga
}

func TestConcurrentGrantsAllSurvive(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		_, k := newKey(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.m.Grant(ctx, GrantRequest{Name: fmt.Sprintf("t%d", i), PublicKey: k, Level: levels.Observe.String()})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.m.Check(ctx)
	if err != nil || !rep.OK() || rep.Grants != 8 || rep.Lines != 8 {
		t.Fatalf("after concurrent grants: %+v %v", rep, err)
	}
}

func TestParseExpiry(t *testing.T) {
	loc := time.FixedZone("CEST", 2*3600)
	now := time.Date(2030, 5, 1, 12, 0, 0, 0, loc)
	for in, want := range map[string]time.Time{
		"8h":                   now.Add(8 * time.Hour),
		"14d":                  now.Add(14 * 24 * time.Hour),
		"2030-05-02":           time.Date(2030, 5, 3, 0, 0, 0, 0, loc),
		"2030-05-02 18:30":     time.Date(2030, 5, 2, 18, 30, 0, 0, loc),
		"2030-05-02T18:30":     time.Date(2030, 5, 2, 18, 30, 0, 0, loc),
		"2030-05-02T18:30:00Z": time.Date(2030, 5, 2, 18, 30, 0, 0, time.UTC),
	} {
		got, err := ParseExpiry(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: got %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5h", "2020-01-01", "0d"} {
		if _, err := ParseExpiry(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGateCommandAndConfigDirArg(t *testing.T) {
	// ConfigDirArg compares with the passwd home (what sshd sets), so a
	// test's own HOME does not matter.
	if arg, err := ConfigDirArg(DefaultConfigDir(passwdHome(t))); err != nil || arg != "" {
		t.Fatalf("default dir needs no argument: %q %v", arg, err)
	}
	if arg, _ := ConfigDirArg("/srv/x/stem"); arg != "/srv/x/stem" {
		t.Fatalf("arg = %q", arg)
	}
	for _, bad := range []string{"relative/stem-mcp", "/a b/stem-mcp", `/a"/stem-mcp`, "/a;b/stem-mcp", "/a$(id)/stem-mcp"} {
		if _, err := GateCommand(bad, "g0123456789abcdef", ""); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := GateCommand("/bin/stem-mcp", "g0123456789abcdef", "/tmp/a b"); err == nil {
		t.Error("accepted a config dir with a space")
	}
	if _, err := GateCommand("/bin/stem-mcp", "g01; id", ""); err == nil {
		t.Error("accepted a bad grant id")
	}
}
