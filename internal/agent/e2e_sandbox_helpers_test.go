package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// The sandbox tests run the real CLIs (scripts/install-agent-clis.sh, in
// the image built by `make agent-image`) against a scripted model
// (testenv/modelserver) that the sandbox reaches only through stem's
// egress proxy, under a name nothing else resolves.

// modelHost is the model's name in the CLIs' base URLs: only the egress
// proxy knows where it is.
const modelHost = "model.stem.invalid"

// boxAccount is an account whose agents.toml points the three CLIs at
// the scripted model.
type boxAccount struct {
	*account
	ms  *modelserver.Server
	env []string // the caller's environment: keys and base URLs
	// last is the request eventReaches found last.
	last modelserver.Request
}

func newBoxAccount(t *testing.T, script ...modelserver.Step) *boxAccount {
	t.Helper()
	return newBoxAccountTB(t, script...)
}

func newBoxAccountTB(t testing.TB, script ...modelserver.Step) *boxAccount {
	t.Helper()
	testenv.RequireAccount(t)
	// Gemini ignores settings under world-writable directories (/tmp).
	cache := filepath.Join(repoRoot(), ".cache")
	return withModel(t, newAccountIn(t, cache), script...)
}

// withModel starts the scripted model and points a's agents.toml at it.
func withModel(t testing.TB, a *account, script ...modelserver.Step) *boxAccount {
	t.Helper()
	ms, err := modelserver.Start(script...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	_, port, _ := strings.Cut(ms.Addr(), ":")
	endpoint := modelHost + ":" + port
	rule := fmt.Sprintf("%q", endpoint+"="+ms.Addr())
	base := "http://" + endpoint
	cfg := fmt.Sprintf(`
[providers.claude]
egress = [%s]

[providers.codex]
egress = [%s]
args = ["-c", "model=\"gpt-test\"", "-c", "model_provider=\"stemtest\"",
  "-c", "model_providers.stemtest={name=\"stemtest\", base_url=\"%s/v1\", wire_api=\"responses\", env_key=\"OPENAI_API_KEY\"}"]

[providers.gemini]
egress = [%s]
args = ["-m", "gemini-2.5-flash"]
`, rule, rule, base, rule)
	f, err := os.OpenFile(filepath.Join(a.Base, "config", agentcli.ConfigFile), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	clis := filepath.Dir(clitest.Bin(t, "claude"))
	b := &boxAccount{account: a, ms: ms, env: []string{
		"PATH=" + a.Bin + ":" + clis + ":" + os.Getenv("PATH"),
		"ANTHROPIC_API_KEY=sk-ant-stem-test-0123456789abcdefghij", "ANTHROPIC_BASE_URL=" + base,
		"OPENAI_API_KEY=sk-stem-test-openai", "GEMINI_API_KEY=stem-test-gemini", "GOOGLE_GEMINI_BASE_URL=" + base,
	}}
	return b
}

// start runs `stemctl agent start` for provider on native-amd64 demo
// hello 1 and returns the record.
func (b *boxAccount) start(provider string, args ...string) agentstore.Record {
	b.t.Helper()
	return b.startTask(provider, []string{"native-amd64", "demo", "hello", "1"}, args...)
}

// startTask runs `stemctl agent start` for provider on a task (PROFILE
// SERIES CARD TASK) and returns the record.
func (b *boxAccount) startTask(provider string, task []string, args ...string) agentstore.Record {
	b.t.Helper()
	var rec agentstore.Record
	argv := append(append([]string{"agent", "start", provider}, task...), "--json")
	r, err := b.runEnv(b.env, append(argv, args...)...)
	if err != nil || r.Code != 0 {
		b.t.Fatalf("agent start %s: exit %d %v\n%s\n%s", provider, r.Code, err, r.Stdout, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil {
		b.t.Fatalf("agent start --json: %v\n%s", err, r.Stdout)
	}
	return rec
}

// prompt types a line into the agent's window, as the student would,
// once the CLI shows its input, and waits for the model to be asked with
// tools.
func (b *boxAccount) prompt(st instanceInfo, rec agentstore.Record, text string) modelserver.Request {
	b.t.Helper()
	b.waitReady(st, rec)
	// A CLI may ask the model before its MCP servers are connected; the
	// model then answers that the tool is not offered yet, and the
	// student asks again.
	for attempt := 0; attempt < 10; attempt++ {
		seen := len(b.ms.Requests())
		b.tmux(st, "send-keys", "-t", rec.Pane, "-l", text)
		b.waitPane(st, rec.Pane, text, 10*time.Second)
		var req modelserver.Request
		var err error
		for tries := 0; tries < 25; tries++ {
			// Under load a CLI can take the text and the Enter in one
			// read, as a paste (Codex, Gemini CLI): the Enter goes into
			// the input as a newline and the line stays. Enter again
			// (an Enter on a CLI's empty input does nothing).
			b.tmux(st, "send-keys", "-t", rec.Pane, "Enter")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			req, err = b.ms.Wait(ctx, func(r modelserver.Request) bool { return len(r.Tools) > 0 && b.ms.Index(r) >= seen })
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			b.t.Fatalf("%s sent the model no request with tools: %v\nits window:\n%s\nsupervisor log:\n%s", rec.Provider, err, b.capture(st, rec.Pane), readFile(rec.Log))
		}
		if req.Step >= 0 {
			return req
		}
		b.waitPane(st, rec.Pane, "not offered yet", 30*time.Second)
	}
	b.t.Fatalf("%s never offered the model the scripted tool; its window:\n%s", rec.Provider, b.capture(st, rec.Pane))
	return modelserver.Request{}
}

// waitReady waits until the CLI in the agent's window shows its input.
func (b *boxAccount) waitReady(st instanceInfo, rec agentstore.Record) {
	b.t.Helper()
	ready := map[string]string{"claude": "❯", "codex": "? for shortcuts", "gemini": "Type your message"}[rec.Adapter]
	b.waitPane(st, rec.Pane, ready, 60*time.Second)
}

// waitPaneChange waits until the pane's text differs from before (a key
// took effect).
func (b *boxAccount) waitPaneChange(st instanceInfo, pane, before string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.capture(st, pane) == before {
		if time.Now().After(deadline) {
			b.t.Fatalf("pane %s did not change; it shows:\n%s", pane, before)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

// podmanOut runs root's podman and returns its output.
func podmanOut(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	return string(out), err
}

// podman runs podman as the account's user (a rootless student's own).
func (a *account) podman(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := a.Command(ctx, "podman", args...).CombinedOutput()
	return string(out), err
}
