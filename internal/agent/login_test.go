package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/xdg"
)

// hostLogins are sign-ins as each CLI's own login leaves them on the host.
var hostLogins = map[string]string{
	"claude": `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-fake","refreshToken":"sk-ant-ort01-fake","expiresAt":4102444800000}}`,
	"codex":  `{"tokens":{"id_token":"a.b.c","access_token":"fake","refresh_token":"fake"}}`,
	"gemini": `{"access_token":"ya29.fake","refresh_token":"1//fake","expiry_date":4102444800000}`,
}

func loginEnv(t *testing.T, home string, environ ...string) *Env {
	t.Helper()
	ps, err := agentcli.LoadProviders(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Dirs: xdg.Dirs{Home: home}, Environ: environ, Providers: ps, Store: agentstore.Store{Root: t.TempDir()}}
}

// The decision `agent start` makes for a CLI in its sandbox, with no
// Podman: a key, else the CLI's sign-in from the host, else a refusal
// that names both.
func TestSignInDecision(t *testing.T) {
	for provider, data := range hostLogins {
		p, _ := loginEnv(t, "").Providers.Get(provider)
		l, _ := agentcli.LoginOf(provider)
		key := sandbox.Credentials(provider)[0]

		home := t.TempDir()
		// Neither: refused, naming the key and the host sign-in.
		_, err := loginEnv(t, home).signIn(p)
		var nk *agentcli.NoKeyError
		if !errors.As(err, &nk) || !strings.Contains(err.Error(), "export "+key+"=") ||
			!strings.Contains(err.Error(), l.Command) || !strings.Contains(err.Error(), filepath.Join(home, l.Dir, l.File)) {
			t.Fatalf("%s with neither: %v", provider, err)
		}
		// A key: nothing carried.
		if c, err := loginEnv(t, home, key+"=k").signIn(p); c != nil || err != nil {
			t.Fatalf("%s with a key: %v %v", provider, c, err)
		}
		// The host's sign-in: carried; a key still wins over it.
		writeHostFile(t, filepath.Join(home, l.Dir, l.File), data)
		c, err := loginEnv(t, home).signIn(p)
		if err != nil || c == nil || string(c.Data) != data {
			t.Fatalf("%s with a host login: %+v %v", provider, c, err)
		}
		if c, err := loginEnv(t, home, key+"=k").signIn(p); c != nil || err != nil {
			t.Fatalf("%s with a key and a host login carried the login: %v %v", provider, c, err)
		}
	}
	// Check refuses before anything starts, and passes a host login.
	home := t.TempDir()
	e := loginEnv(t, home)
	if _, _, err := e.Check("claude", agentstore.ModeWindow); err == nil || !strings.Contains(err.Error(), "claude auth login") {
		t.Fatalf("Check without a key or login: %v", err)
	}
	writeHostFile(t, filepath.Join(home, ".claude", ".credentials.json"), hostLogins["claude"])
	if _, _, err := e.Check("claude", agentstore.ModeWindow); err != nil {
		t.Fatalf("Check with a host login: %v", err)
	}
}

// Only the credential reaches the sandbox's home: a private copy, not
// the host's directory, whose other files (a canary) stay behind.
func TestCarryLoginCopiesOneFile(t *testing.T) {
	host := t.TempDir()
	writeHostFile(t, filepath.Join(host, ".claude", ".credentials.json"), hostLogins["claude"])
	writeHostFile(t, filepath.Join(host, ".claude", "canary"), "host-only")
	writeHostFile(t, filepath.Join(host, ".claude", "settings.json"), `{"hooks":{}}`)
	e := loginEnv(t, host)
	p, _ := e.Providers.Get("claude")
	c, err := e.signIn(p)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	home := t.TempDir()
	if err := carryLogin(home, c); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		rel, _ := filepath.Rel(home, p)
		got = append(got, rel+" "+fi.Mode().String())
		return err
	})
	want := []string{". " + mustMode(t, home), ".claude drwx------", ".claude/.credentials.json -rw-------"}
	if !slices.Equal(got, want) {
		t.Fatalf("sandbox home: %v, want %v", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(home, ".claude", ".credentials.json")); string(data) != hostLogins["claude"] {
		t.Fatalf("copy: %s", data)
	}
	// A second copy never writes through what is there (the home is new
	// for each agent).
	if err := carryLogin(home, c); err == nil {
		t.Fatal("carryLogin overwrote an existing file")
	}
	// The login's endpoints are added to the egress once.
	l, _ := agentcli.LoginOf("claude")
	eg := withLogin(append([]string{"api.anthropic.com:443"}, l.Egress...), c)
	if len(eg) != 1+len(l.Egress) || withLogin(eg, nil)[0] != "api.anthropic.com:443" {
		t.Fatalf("egress %v", eg)
	}
}

func writeHostFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustMode(t *testing.T, p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().String()
}
