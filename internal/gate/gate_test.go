package gate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/registry"
)

type fixture struct {
	dir, config, state, runtime string
	grant                       access.Grant
	mgr                         *access.Manager
}

func pubLine(t *testing.T) string {
	t.Helper()
	pk, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return string(ssh.MarshalAuthorizedKey(pub))
}

func newFixture(t *testing.T, level string, instances ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, config: filepath.Join(dir, "config"), state: filepath.Join(dir, "state"), runtime: filepath.Join(dir, "run")}
	if err := os.MkdirAll(f.runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := access.OpenStore(f.config)
	if err != nil {
		t.Fatal(err)
	}
	f.mgr = &access.Manager{
		Store: store, AuthorizedKeys: filepath.Join(dir, "authorized_keys"), MCPBinary: "/usr/local/bin/stem-mcp",
		ConfigDirArg: f.config,
		Env:          map[string]string{"XDG_RUNTIME_DIR": f.runtime, "STEM_STATE_DIR": f.state, "STEM_CONFIG_DIR": f.config},
	}
	f.grant, err = f.mgr.Grant(context.Background(), access.GrantRequest{Name: "kowalski", PublicKey: pubLine(t), Level: level, Instances: instances})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// env is the environment sshd gives a forced command, plus extras.
func (f *fixture) env(cmd string, extra ...string) func(string) string {
	m := map[string]string{
		"HOME": "/root", "USER": "anna", "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh",
		"SSH_CONNECTION":       "192.0.2.7 50022 192.0.2.1 22",
		"SSH_ORIGINAL_COMMAND": cmd,
		// What a hostile client could try to smuggle (only via AcceptEnv,
		// but the gate must not care either way).
		"STEM_CONFIG_DIR": "/evil", "XDG_CONFIG_HOME": "/evil", "STEM_LEVEL": "full", "LD_PRELOAD": "/evil.so",
	}
	if cmd == "<unset>" {
		delete(m, "SSH_ORIGINAL_COMMAND")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return func(k string) string { return m[k] }
}

type recorder struct {
	calls []ServeRequest
}

func (r *recorder) serve(_ context.Context, req ServeRequest) error {
	r.calls = append(r.calls, req)
	_, err := req.Out.Write([]byte("served\n"))
	return err
}

func (f *fixture) run(t *testing.T, cmd string, rec *recorder, extra ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env(cmd, extra...), In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Serve: rec.serve,
	})
	return code, out.String(), errOut.String()
}

func TestMCPServesAtTheGrantsLevel(t *testing.T) {
	f := newFixture(t, levels.Assist.String(), "hazard3-sim-inf-bss-t4", "native-amd64-inf-bss-t5")
	rec := &recorder{}
	code, out, errOut := f.run(t, "mcp hazard3-sim-inf-bss-t4", rec)
	if code != 0 || out != "served\n" || errOut != "" {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
	req := rec.calls[0]
	if req.Level != levels.Assist.String() || req.Instance != "hazard3-sim-inf-bss-t4" ||
		strings.Join(req.AllowedInstances, ",") != "hazard3-sim-inf-bss-t4,native-amd64-inf-bss-t5" {
		t.Fatalf("request = %+v", req)
	}
	if req.Identity.Grant != f.grant.Label() || req.Identity.KeyFP != f.grant.KeyFP || req.Identity.Client != "192.0.2.7:50022" || req.Identity.Account == "" {
		t.Fatalf("identity = %+v", req.Identity)
	}
	// The server's environment: recorded dirs, a few harmless variables,
	// nothing the client could have sent.
	if req.Getenv("XDG_RUNTIME_DIR") != f.runtime || req.Getenv("STEM_STATE_DIR") != f.state || req.Getenv("STEM_CONFIG_DIR") != f.config {
		t.Fatal("recorded directories not passed")
	}
	for _, k := range []string{"SSH_ORIGINAL_COMMAND", "XDG_CONFIG_HOME", "STEM_LEVEL", "LD_PRELOAD", "SSH_CONNECTION"} {
		if v := req.Getenv(k); v != "" {
			t.Errorf("server sees %s=%q", k, v)
		}
	}

	// No instance: the server follows the selection, limited to the grant.
	code, _, _ = f.run(t, "mcp", rec)
	if code != 0 || rec.calls[1].Instance != "" || len(rec.calls[1].AllowedInstances) != 2 {
		t.Fatalf("bare mcp: %d %+v", code, rec.calls[1])
	}
	// Extra spaces are just separators.
	if code, _, _ = f.run(t, "  mcp   native-amd64-inf-bss-t5 ", rec); code != 0 || rec.calls[2].Instance != "native-amd64-inf-bss-t5" {
		t.Fatalf("spaced: %d %+v", code, rec.calls)
	}
}

func TestUnrestrictedGrantAllowsAnyInstance(t *testing.T) {
	f := newFixture(t, levels.Observe.String())
	rec := &recorder{}
	if code, _, errOut := f.run(t, "mcp whatever-t1", rec); code != 0 {
		t.Fatalf("refused: %s", errOut)
	}
	if rec.calls[0].AllowedInstances != nil || rec.calls[0].Level != levels.Observe.String() {
		t.Fatalf("request = %+v", rec.calls[0])
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, levels.Full.String(), "hazard3-sim-inf-bss-t4")
	cases := []string{
		"<unset>", "", "   ", "bash", "sh -c id", "id", "mcp; id", "mcp;id", "mcp && id", "mcp || id", "mcp | id",
		"mcp `id`", "mcp $(id)", "mcp ${HOME}", "mcp > /tmp/x", "mcp < /etc/passwd",
		"mcp ../x", "mcp ..", "mcp ./x", "mcp /abs", "mcp hazard3-sim-inf-bss-t4/../x",
		"mcp other-instance", "mcp HAZARD3-SIM-INF-BSS-T4", "mcp hazard3-sim-inf-bss-t4 extra",
		"mcp\nid", "mcp\tid", "mcp\rid", "mcp\x00", "mcp 'x'", "mcp \"x\"", "mcp x\\y", "mcp *", "mcp ~",
		"mcp --level full", "mcp --grant g0000000000000000", "mcp --config-dir /tmp", "mcp -l",
		"MCP", "status x", "list x", "scp -f /etc/passwd", "internal-sftp", "rsync --server",
		"mcp é", strings.Repeat("a", 300),
	}
	log, err := audit.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cases {
		rec := &recorder{}
		code, out, errOut := f.run(t, cmd, rec)
		if code != ExitRefused || len(rec.calls) != 0 || out != "" {
			t.Errorf("%q: code %d, served %d, out %q", cmd, code, len(rec.calls), out)
			continue
		}
		want := "stem-mcp gate: [bad_input] refused: "
		if strings.HasPrefix(cmd, "mcp other-instance") || cmd == "mcp HAZARD3-SIM-INF-BSS-T4" {
			want = "stem-mcp gate: [not_granted] refused: "
		}
		if !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: stderr is not one clear line starting %q: %q", cmd, want, errOut)
		}
		entries, err := log.Read(audit.Filter{Event: audit.Refused})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != i+1 {
			t.Fatalf("%q: %d refusal entries, want %d", cmd, len(entries), i+1)
		}
		e := entries[i]
		if e.Grant != f.grant.Label() || e.KeyFP != f.grant.KeyFP || e.Client != "192.0.2.7:50022" || e.Level != levels.Full.String() || e.Result != "refused" {
			t.Errorf("%q: audit entry %+v", cmd, e)
		}
	}
	if res, err := log.Verify(); err != nil || !res.OK {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

func TestRefusedWhenGrantGoneExpiredOrStoreUnsafe(t *testing.T) {
	ctx := context.Background()
	t.Run("revoked", func(t *testing.T) {
		f := newFixture(t, levels.Full.String())
		if _, _, err := f.mgr.Revoke(ctx, "kowalski"); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := f.run(t, "mcp", &recorder{}); code != ExitRefused || !strings.HasPrefix(errOut, "stem-mcp gate: [revoked] refused: ") || !strings.Contains(errOut, "does not exist") {
			t.Fatalf("%d %q", code, errOut)
		}
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t, levels.Full.String())
		// A grant whose line lost its expiry-time (hand edit): the gate
		// still enforces the stored expiry.
		if err := f.mgr.Store.Update(ctx, func(st *access.State) error {
			g := st.Grants[f.grant.ID]
			g.Expires = time.Now().Add(-time.Minute)
			st.Grants[g.ID] = g
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		if code, _, errOut := f.run(t, "mcp", rec); code != ExitRefused || !strings.HasPrefix(errOut, "stem-mcp gate: [expired] refused: ") || len(rec.calls) != 0 {
			t.Fatalf("%d %q", code, errOut)
		}
	})
	t.Run("from outside the grant's addresses", func(t *testing.T) {
		f := newFixture(t, levels.Full.String())
		// The stored grant says from=127.0.0.1, the line does not (a hand
		// edit dropped it); the client comes from 192.0.2.7.
		if err := f.mgr.Store.Update(ctx, func(st *access.State) error {
			g := st.Grants[f.grant.ID]
			g.From = "127.0.0.1,10.0.0.0/8"
			st.Grants[g.ID] = g
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		if code, _, errOut := f.run(t, "mcp", rec); code != ExitRefused || !strings.HasPrefix(errOut, "stem-mcp gate: [not_granted] refused: ") || !strings.Contains(errOut, "192.0.2.7") || len(rec.calls) != 0 {
			t.Fatalf("%d %q", code, errOut)
		}
		if code, _, errOut := f.run(t, "mcp", rec, "SSH_CONNECTION", ""); code != ExitRefused || len(rec.calls) != 0 {
			t.Fatalf("no SSH_CONNECTION: %d %q", code, errOut)
		}
		if code, _, errOut := f.run(t, "mcp", rec, "SSH_CONNECTION", "10.1.2.3 5000 10.0.0.1 22"); code != 0 || len(rec.calls) != 1 {
			t.Fatalf("allowed address: %d %q", code, errOut)
		}
	})
	t.Run("group-writable store", func(t *testing.T) {
		f := newFixture(t, levels.Full.String())
		if err := os.Chmod(f.mgr.Store.Path(), 0o620); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := f.run(t, "mcp", &recorder{}); code != ExitRefused || !strings.HasPrefix(errOut, "stem-mcp gate: [bad_setup] refused: ") || !strings.Contains(errOut, "writable") {
			t.Fatalf("%d %q", code, errOut)
		}
	})
	t.Run("store cut short", func(t *testing.T) {
		// A full disk or a crash left the grants file half written: every
		// teacher is refused, with the file and its repair, and nothing is
		// served. The fixture's intact store serves (the other subtests).
		f := newFixture(t, levels.Full.String())
		data, err := os.ReadFile(f.mgr.Store.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.mgr.Store.Path(), data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		code, _, errOut := f.run(t, "mcp", rec)
		if code != ExitRefused || len(rec.calls) != 0 || !strings.HasPrefix(errOut, "stem-mcp gate: [bad_setup] refused: ") {
			t.Fatalf("%d %q", code, errOut)
		}
		for _, want := range []string{f.mgr.Store.Path(), "not valid JSON", "stemctl access grant"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("refusal lacks %q: %s", want, errOut)
			}
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		f := newFixture(t, levels.Full.String())
		var errOut bytes.Buffer
		code := Main(ctx, []string{"--grant", "g0000000000000000", "--config-dir", f.config}, Options{Getenv: f.env("mcp"), ErrOut: &errOut, Serve: (&recorder{}).serve})
		if code != ExitRefused {
			t.Fatalf("%d %q", code, errOut.String())
		}
	})
}

func TestBadForcedCommand(t *testing.T) {
	f := newFixture(t, levels.Full.String())
	for _, args := range [][]string{
		nil,
		{"--grant", "../../etc"},
		{"--grant", f.grant.ID, "extra"},
		{"--grant", f.grant.ID, "--level", "full"},
	} {
		var errOut bytes.Buffer
		rec := &recorder{}
		code := Main(context.Background(), args, Options{Getenv: f.env("mcp"), ErrOut: &errOut, Serve: rec.serve})
		if code != ExitFailed || len(rec.calls) != 0 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: code %d, %q", args, code, errOut.String())
		}
	}
	// Without --config-dir the gate reads $HOME/.config/stem, never a
	// client-supplied variable.
	home := t.TempDir()
	var errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID}, Options{Getenv: f.env("mcp", "HOME", home), ErrOut: &errOut, Serve: (&recorder{}).serve})
	if code != ExitRefused || !strings.Contains(errOut.String(), filepath.Join(home, ".config", "stem")) {
		t.Fatalf("default config dir: %d %q", code, errOut.String())
	}
}

func TestParseCommand(t *testing.T) {
	for in, want := range map[string][2]string{
		"mcp":          {"mcp", ""},
		"mcp a-b.c_d1": {"mcp", "a-b.c_d1"},
		"status":       {"status", ""},
		" list ":       {"list", ""},
	} {
		v, i, err := ParseCommand(in)
		if err != nil || v != want[0] || i != want[1] {
			t.Errorf("%q: %q %q %v", in, v, i, err)
		}
	}
}

// listen makes a Unix socket that accepts connections (a stand-in for a
// live tmux or nvim server in the unit test; the sshd tests use real ones).
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func TestStatusAndList(t *testing.T) {
	f := newFixture(t, levels.Observe.String(), "live-t1", "dead-t2", "absent-t3")
	reg, err := registry.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"live-t1", "dead-t2", "other-t9"} {
		sd := filepath.Join(f.runtime, name)
		if err := os.MkdirAll(sd, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := reg.Put(ctx, registry.Record{Instance: name, Profile: "native-amd64", ContainerID: strings.Repeat("a", 64), SocketDir: sd}); err != nil {
			t.Fatal(err)
		}
	}
	listen(t, filepath.Join(f.runtime, "live-t1", "t.sock"))
	listen(t, filepath.Join(f.runtime, "live-t1", "n.sock"))

	code, out, errOut := f.run(t, "status", &recorder{}, "SSH_TTY", "/dev/pts/3")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	var st Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, out)
	}
	if st.Level != levels.Observe.String() || st.Grant != "kowalski" || len(st.Instances) != 3 || !st.Session.TTY || st.Session.AgentForwarded {
		t.Fatalf("status = %+v", st)
	}
	got := map[string]InstanceStatus{}
	for _, is := range st.Instances {
		got[is.Instance] = is
	}
	if !got["live-t1"].Answers || got["dead-t2"].Answers || got["dead-t2"].Error == "" || got["absent-t3"].Registered {
		t.Fatalf("instances = %+v", st.Instances)
	}
	if _, ok := got["other-t9"]; ok {
		t.Fatal("status shows an instance outside the grant")
	}

	code, out, _ = f.run(t, "list", &recorder{})
	if code != 0 || out != "absent-t3\ndead-t2\nlive-t1\n" {
		t.Fatalf("list: %d %q", code, out)
	}
	log, _ := audit.Open(f.state)
	if entries, _ := log.Read(audit.Filter{Event: audit.ToolCall}); len(entries) != 2 || entries[0].Tool != "gate.status" {
		t.Fatalf("audit = %+v", entries)
	}
}

func TestServeErrorIsReported(t *testing.T) {
	f := newFixture(t, levels.Full.String())
	var errOut bytes.Buffer
	code := Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("mcp"), ErrOut: &errOut,
		Serve: func(context.Context, ServeRequest) error {
			return errors.New("no instance selected\nrun stemctl mcp select")
		},
	})
	if code != ExitFailed || errOut.String() != "stem-mcp gate: [internal] no instance selected run stemctl mcp select\n" {
		t.Fatalf("%d %q", code, errOut.String())
	}
}

// Revoking a grant ends a session that is already open, whether or not the
// server notices its context.
func TestRevokeEndsAnOpenSession(t *testing.T) {
	for name, serve := range map[string]func(context.Context, ServeRequest) error{
		"server honours ctx": func(ctx context.Context, _ ServeRequest) error { <-ctx.Done(); return ctx.Err() },
		"server ignores ctx": func(context.Context, ServeRequest) error { select {} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, levels.Full.String())
			started := time.Now()
			done := make(chan int, 1)
			serving := make(chan struct{})
			var errOut bytes.Buffer
			go func() {
				done <- Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
					Getenv: f.env("mcp"), ErrOut: &errOut, RecheckEvery: 50 * time.Millisecond,
					Serve: func(ctx context.Context, r ServeRequest) error { close(serving); return serve(ctx, r) },
				})
			}()
			select {
			case <-serving:
			case code := <-done:
				t.Fatalf("session ended before it was served: %d %s", code, errOut.String())
			case <-time.After(10 * time.Second):
				t.Fatal("the session was not served within 10 s")
			}
			select {
			case code := <-done:
				t.Fatalf("session ended before the revoke: %d %s", code, errOut.String())
			default:
			}
			if _, _, err := f.mgr.Revoke(context.Background(), "kowalski"); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				if code != ExitRefused || errOut.String() != "stem-mcp gate: [revoked] refused: grant kowalski was revoked; session ended\n" {
					t.Fatalf("code %d, %q", code, errOut.String())
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("session still open %v after the revoke", time.Since(started))
			}
			log, _ := audit.Open(f.state)
			if e, _ := log.Read(audit.Filter{Event: audit.SessionEnd}); len(e) != 1 || e[0].Result != "refused" {
				t.Fatalf("audit = %+v", e)
			}
		})
	}
}

// A grant changed under an open session (another level) ends it with its
// own code: the teacher connects again rather than asks for a new grant.
func TestChangedGrantEndsTheSessionWithItsCode(t *testing.T) {
	f := newFixture(t, levels.Full.String())
	serving := make(chan struct{})
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- Main(context.Background(), []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
			Getenv: f.env("mcp"), ErrOut: &errOut, RecheckEvery: 50 * time.Millisecond,
			Serve: func(ctx context.Context, _ ServeRequest) error { close(serving); <-ctx.Done(); return ctx.Err() },
		})
	}()
	<-serving
	if err := f.mgr.Store.Update(context.Background(), func(st *access.State) error {
		g := st.Grants[f.grant.ID]
		g.Level = levels.Observe.String()
		st.Grants[g.ID] = g
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != ExitRefused || !strings.HasPrefix(errOut.String(), "stem-mcp gate: [grant_changed] refused: grant kowalski was changed") {
		t.Fatalf("code %d, %q", code, errOut.String())
	}
}
