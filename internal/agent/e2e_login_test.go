package agent_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// A student who signed in once on the host with Claude Code's own login
// and has no API key: `agent start claude` carries that one file into the
// sandbox, the real CLI there skips its login screen and sends the
// login's token to the (scripted) model API, and nothing else of the
// host's ~/.claude reaches the sandbox. Without the file stem refuses.
func TestSandboxCarriesHostLogin(t *testing.T) {
	t.Parallel() // its own account and model
	b := newBoxAccount(t, modelserver.Say("stem-login-done"))
	var env []string
	for _, kv := range b.env {
		if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			env = append(env, kv)
		}
	}
	task := []string{"native-amd64", "demo", "hello", "1"}
	r, err := b.runEnv(env, append([]string{"agent", "start", "claude"}, append(task, "--background")...)...)
	if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, "export ANTHROPIC_API_KEY=") || !strings.Contains(r.Stderr, "claude auth login") {
		t.Fatalf("claude with neither a key nor a host login: exit %d %v\n%s", r.Code, err, r.Stderr)
	}

	const token = "sk-ant-oat01-stem-carried-login-token"
	const canary = "stem-host-canary-never-in-the-sandbox"
	dir := filepath.Join(b.Base, "home", ".claude")
	creds := `{"claudeAiOauth":{"accessToken":"` + token + `","refreshToken":"sk-ant-ort01-stem-fake","expiresAt":4102444800000,"scopes":["user:inference","user:profile"],"subscriptionType":"pro"}}`
	for name, data := range map[string]string{".credentials.json": creds, "canary.txt": canary,
		"settings.json": `{"env":{"STEM_CANARY":"` + canary + `"}}`, "CLAUDE.md": canary} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.env = env
	rec := b.start("claude")
	st := b.status(nativeInst)
	if !slices.Contains(rec.Egress, "platform.claude.com:443") {
		t.Errorf("egress without the login's refresh endpoint: %v", rec.Egress)
	}
	req := b.prompt(st, rec, "hello from a carried login")
	if got := req.Header.Get("Authorization"); got != "Bearer "+token {
		t.Errorf("the model saw Authorization %q, want the carried token", got)
	}
	if k := req.Header.Get("X-Api-Key"); k != "" {
		t.Errorf("the model saw an API key %q", k)
	}
	if w := b.capture(st, rec.Pane); strings.Contains(w, "/login") || strings.Contains(w, "Select login method") {
		t.Errorf("claude showed its login screen:\n%s", w)
	}

	// In the sandbox: the copy alone, private to the sandbox user; none of
	// the host's other files, and no mount of the host's directory.
	out, err := b.podman("exec", rec.Sandbox, "sh", "-c",
		`stat -c '%a %u' "$HOME/.claude/.credentials.json"; grep -rl `+canary+` "$HOME" /etc/stem-agent 2>/dev/null; env | grep -c `+canary+`; echo end`)
	if err != nil {
		t.Fatalf("inspect the sandbox: %v\n%s", err, out)
	}
	if lines := strings.Fields(out); len(lines) != 4 || lines[0] != "600" || lines[2] != "0" || lines[3] != "end" {
		t.Errorf("in the sandbox (want the copy 600, no canary anywhere):\n%s", out)
	}
	mounts, err := b.podman("inspect", "--format", "{{range .Mounts}}{{.Source}}\n{{end}}", rec.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range strings.Fields(mounts) {
		if strings.HasPrefix(m, filepath.Join(b.Base, "home")) {
			t.Errorf("the sandbox mounts the host's home: %s", m)
		}
	}
}

// Codex signed in with ChatGPT on the host, no key: the carried auth.json
// is used, its access token reaching the scripted model (a provider that
// takes the OpenAI sign-in, as chatgpt.com's backend does), and the
// proxy allows the sign-in's endpoints.
func TestSandboxCarriesCodexLogin(t *testing.T) {
	b := newBoxAccount(t, modelserver.Say("stem-login-done"))
	var env []string
	for _, kv := range b.env {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			env = append(env, kv)
		}
	}
	b.env = env
	cfg := filepath.Join(b.Base, "config", "agents.toml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	with := strings.Replace(string(data), `env_key=\"OPENAI_API_KEY\"`, `requires_openai_auth=true`, 1)
	if with == string(data) {
		t.Fatal("the codex provider of the test account changed: no env_key to replace")
	}
	if err := os.WriteFile(cfg, []byte(with), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "stem-carried-chatgpt-access-token"
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	idToken := b64(`{"alg":"none"}`) + "." + b64(`{"email":"student@example.invalid","exp":4102444800,"https://api.openai.com/auth":{"chatgpt_plan_type":"plus","chatgpt_account_id":"acct-stem"}}`) + ".c2ln"
	auth := `{"OPENAI_API_KEY":null,"tokens":{"id_token":"` + idToken + `","access_token":"` + token +
		`","refresh_token":"stem-fake-refresh","account_id":"acct-stem"},"last_refresh":"` + time.Now().UTC().Format(time.RFC3339) + `"}`
	dir := filepath.Join(b.Base, "home", ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "auth.json"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := b.start("codex")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervisor log:\n%s\nmodel requests: %d", readFile(rec.Log), len(b.ms.Requests()))
		}
	})
	for _, h := range []string{"auth.openai.com:443", "chatgpt.com:443"} {
		if !slices.Contains(rec.Egress, h) {
			t.Errorf("egress without %s: %v", h, rec.Egress)
		}
	}
	// Its first call to the model API (the model list) carries the
	// token. Offline, Codex then stops: signed in with ChatGPT it also
	// needs chatgpt.com itself, which no test can answer.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := b.ms.Wait(ctx, func(modelserver.Request) bool { return true })
	if err != nil {
		t.Fatalf("codex sent the model nothing: %v", err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+token {
		t.Errorf("the model saw Authorization %q on %s, want the carried token", got, req.Path)
	}
}
