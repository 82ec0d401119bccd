package agentcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/egress"
)

// signedIn are credential files as each CLI's own login writes them.
var signedIn = map[string]string{
	AdapterClaude: `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"sk-ant-ort01-x","expiresAt":4102444800000,"scopes":["user:inference"]}}`,
	AdapterCodex:  `{"OPENAI_API_KEY":null,"tokens":{"id_token":"a.b.c","access_token":"x","refresh_token":"y","account_id":"z"},"last_refresh":"2026-01-01T00:00:00Z"}`,
	AdapterGemini: `{"access_token":"ya29.x","refresh_token":"1//x","scope":"openid","token_type":"Bearer","expiry_date":4102444800000}`,
}

func writeLogin(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func noEnv(string) string { return "" }

// Each CLI's sign-in is found where the CLI itself keeps it (its own
// variables move it), and only a file that holds one is carried.
func TestReadHostLogin(t *testing.T) {
	for adapter, data := range signedIn {
		home := t.TempDir()
		l, _ := LoginOf(adapter)
		if c, err := ReadHostLogin(adapter, home, noEnv); c != nil || err != nil {
			t.Fatalf("%s with no file: %v %v", adapter, c, err)
		}
		path := filepath.Join(home, l.Dir, l.File)
		writeLogin(t, path, data)
		c, err := ReadHostLogin(adapter, home, noEnv)
		if err != nil || c == nil || c.HostPath != path || string(c.Data) != data {
			t.Fatalf("%s: %+v %v", adapter, c, err)
		}
		if c.Login.SandboxPath() != filepath.Join(l.Dir, l.File) || filepath.IsAbs(c.Login.SandboxPath()) {
			t.Fatalf("%s: sandbox path %q", adapter, c.Login.SandboxPath())
		}
		// Signed out (the CLIs empty the tokens), not JSON, or a directory.
		signedOut := map[string]string{AdapterClaude: `{"claudeAiOauth":{"accessToken":"","refreshToken":""}}`,
			AdapterCodex: `{"OPENAI_API_KEY":null,"tokens":null}`, AdapterGemini: `{}`}[adapter]
		for _, bad := range []string{signedOut, "not json"} {
			writeLogin(t, path, bad)
			if c, err := ReadHostLogin(adapter, home, noEnv); c != nil || err != nil {
				t.Fatalf("%s carried %q: %v %v", adapter, bad, c, err)
			}
		}
		os.Remove(path)
		os.Mkdir(path, 0o700)
		if _, err := ReadHostLogin(adapter, home, noEnv); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("%s: a directory: %v", adapter, err)
		}
		for _, h := range l.Egress {
			if _, err := egress.ParseRule(h); err != nil {
				t.Fatalf("%s: egress %q: %v", adapter, h, err)
			}
		}
	}
	home, moved := t.TempDir(), t.TempDir()
	env := map[string]string{"CLAUDE_CONFIG_DIR": moved, "CODEX_HOME": moved, "GEMINI_CLI_HOME": moved}
	want := map[string]string{AdapterClaude: filepath.Join(moved, ".credentials.json"),
		AdapterCodex: filepath.Join(moved, "auth.json"), AdapterGemini: filepath.Join(moved, ".gemini", "oauth_creds.json")}
	for adapter, path := range want {
		l, _ := LoginOf(adapter)
		if got := l.HostPath(home, func(k string) string { return env[k] }); got != path {
			t.Errorf("%s: %s, want %s", adapter, got, path)
		}
	}
	if _, ok := LoginOf(AdapterCustom); ok {
		t.Fatal("a custom provider has a host login")
	}
}

// The refusal names both ways in: the key to export and the CLI's own
// sign-in on the host, with the one file stem would copy.
func TestNoKeyErrorNamesBothWays(t *testing.T) {
	err := (&NoKeyError{Provider: "claude", Vars: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
		Where: KeyPage("claude"), Login: "claude auth login", LoginFile: "/home/s/.claude/.credentials.json"}).Error()
	for _, want := range []string{"needs an API key", "export ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN", "console.anthropic.com",
		"`claude auth login`", "only /home/s/.claude/.credentials.json", "browser"} {
		if !strings.Contains(err, want) {
			t.Errorf("missing %q in: %s", want, err)
		}
	}
}

// With a carried Google sign-in Gemini is told to use it, not a key.
func TestGeminiSandboxAuthType(t *testing.T) {
	for login, want := range map[bool]string{false: "gemini-api-key", true: "oauth-personal"} {
		s := testSession("gemini")
		s.Sandboxed, s.HostLogin = true, login
		l, err := Plan(s)
		if err != nil {
			t.Fatal(err)
		}
		var settings struct {
			Security struct{ Auth struct{ SelectedType string } }
		}
		if err := json.Unmarshal(l.Files[GeminiDefaults], &settings); err != nil || settings.Security.Auth.SelectedType != want {
			t.Fatalf("host login %v: %q %v, want %q", login, settings.Security.Auth.SelectedType, err, want)
		}
	}
}
