package access

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/xdg"
)

type env struct {
	f               *cmdutil.Factory
	in, out, errOut *bytes.Buffer
	dirs            xdg.Dirs
	keys            string
	mcp             string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	ios, in, out, errOut := iostreams.Test()
	e := &env{in: in, out: out, errOut: errOut}
	e.dirs = xdg.Dirs{Runtime: filepath.Join(base, "run"), State: filepath.Join(base, "state"), Config: filepath.Join(base, "config"), Home: filepath.Join(base, "home")}
	e.keys = filepath.Join(e.dirs.Home, ".ssh", "authorized_keys")
	vars := map[string]string{"HOME": e.dirs.Home, "STEM_WORKSPACE": filepath.Join(base, "ws")}
	// check wants the forced command's program to exist.
	mcp := filepath.Join(base, "bin", "stem-mcp")
	if err := os.MkdirAll(filepath.Dir(mcp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mcp, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.mcp = mcp
	e.f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return vars[k] },
		Dirs:      func() (xdg.Dirs, error) { return e.dirs, nil },
		MCPBinary: func() (string, error) { return mcp, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(e.dirs.State) },
	}
	return e
}

func (e *env) run(t *testing.T, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	cmd := NewCmdAccess(e.f)
	cmd.SetArgs(args)
	cmd.SetIn(e.in)
	cmd.SetOut(e.out)
	cmd.SetErr(e.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func TestKeygenGrantListCheckRevoke(t *testing.T) {
	e := newEnv(t)
	// Teacher side: keygen prints only the public line on stdout.
	if err := e.run(t, "keygen", "--name", "kowalski"); err != nil {
		t.Fatal(err)
	}
	pubLine := strings.TrimSpace(e.out.String())
	if !strings.HasPrefix(pubLine, "ssh-ed25519 ") || strings.Count(e.out.String(), "\n") != 1 {
		t.Fatalf("keygen stdout: %q", e.out.String())
	}
	priv := filepath.Join(e.dirs.Home, ".ssh", "stem_kowalski")
	if fi, err := os.Stat(priv); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", fi, err)
	}
	if err := e.run(t, "keygen", "--name", "kowalski"); err == nil {
		t.Fatal("keygen overwrote a key")
	}

	// Student side: grant the .pub from stdin.
	e.in.WriteString(pubLine + "\n")
	if err := e.run(t, "grant", "--name", "kowalski", "--key", "-", "--level", "assist", "--instance", "hazard3-sim-inf-bss-t4", "--expires", "14d", "--json"); err != nil {
		t.Fatal(err)
	}
	var g access.Grant
	if err := json.Unmarshal(e.out.Bytes(), &g); err != nil {
		t.Fatalf("grant --json: %v\n%s", err, e.out.String())
	}
	if g.Level != "assist" || g.Expires.IsZero() || g.Instances[0] != "hazard3-sim-inf-bss-t4" {
		t.Fatalf("grant = %+v", g)
	}
	data, err := os.ReadFile(e.keys)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `restrict,command="`+e.mcp+` gate --grant `+g.ID+` --config-dir `+e.dirs.Config+`",expiry-time="`) {
		t.Fatalf("line: %s", data)
	}
	// What the gate will need, recorded from this stemctl's environment.
	st, err := access.OpenStore(e.dirs.Config)
	if err != nil {
		t.Fatal(err)
	}
	state, err := st.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if state.Env["XDG_RUNTIME_DIR"] != e.dirs.Runtime || state.Env["STEM_STATE_DIR"] != e.dirs.State || state.Env["STEM_WORKSPACE"] == "" {
		t.Fatalf("recorded env = %v", state.Env)
	}

	if err := e.run(t, "list"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.out.String(), "kowalski") || !strings.Contains(e.out.String(), "assist") || !strings.Contains(e.out.String(), " ok") {
		t.Fatalf("list:\n%s", e.out.String())
	}
	if err := e.run(t, "check"); err != nil || !strings.HasPrefix(e.out.String(), "ok: 1 grant(s), 1 stem line(s)") {
		t.Fatalf("check: %v %s", err, e.out.String())
	}

	// A hand-added line for a grant that does not exist: check fails.
	f, _ := os.OpenFile(e.keys, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`restrict,command="` + e.mcp + ` gate --grant g0000000000000000" ` + pubLine + "\n")
	f.Close()
	err = e.run(t, "check")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(e.out.String(), "g0000000000000000, which does not exist") {
		t.Fatalf("check: %v\n%s", err, e.out.String())
	}

	if err := e.run(t, "revoke", "kowalski"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.out.String(), "removed 1 line(s)") {
		t.Fatalf("revoke: %s", e.out.String())
	}
	data, _ = os.ReadFile(e.keys)
	if strings.Contains(string(data), g.ID) || !strings.Contains(string(data), "g0000000000000000") {
		t.Fatalf("after revoke: %s", data)
	}
	log, _ := audit.Open(e.dirs.State)
	if entries, _ := log.Read(audit.Filter{}); len(entries) != 2 || entries[0].Event != audit.Grant || entries[1].Event != audit.Revoke {
		t.Fatalf("audit = %+v", entries)
	}
}

func TestGrantRefusesTheOrdinaryKeyAndSaysWhy(t *testing.T) {
	e := newEnv(t)
	if err := e.run(t, "keygen", "--name", "ordinary", "--out", filepath.Join(e.dirs.Home, "k")); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(e.out.String())
	if err := os.MkdirAll(filepath.Dir(e.keys), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.keys, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := e.run(t, "grant", "--name", "t", "--key", filepath.Join(e.dirs.Home, "k.pub"), "--level", "observe")
	if err == nil || !strings.Contains(err.Error(), "ordinary key") {
		t.Fatalf("err = %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"grant", "--key", "x.pub", "--level", "observe"},
		{"grant", "--name", "t", "--level", "observe"},
		{"grant", "--name", "t", "--key", "x.pub"},
		{"grant", "--name", "t", "--key", "x.pub", "--level", "observe", "--expires", "yesterday"},
		{"revoke"},
		{"keygen"},
	} {
		if err := e.run(t, args...); !cmdutil.IsFlagError(err) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	e := newEnv(t)
	for _, sub := range []string{"grant", "list", "revoke", "check", "keygen"} {
		if err := e.run(t, sub, "--help"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.out.String(), "Examples:") {
			t.Errorf("%s --help has no examples:\n%s", sub, e.out.String())
		}
	}
}
