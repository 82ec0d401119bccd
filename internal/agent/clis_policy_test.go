package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/workspace"
)

// A task whose policy keeps agents from editing directly ("hints only")
// also turns off the CLI's own ways to change the card: each real CLI,
// launched exactly as the adapter says, offers its model no file-writing
// or shell tool of its own (Codex: its sandbox is read-only), while the
// same CLI without the policy (the control) does.

func hintsOnly(r *workspace.Resolved) {
	r.Policy = agentpolicy.Policy{MaxLevel: agentpolicy.CapAssist, Edits: agentpolicy.EditsNone, Hints: true}
}

// ownTools are the names of a request's tools that are not stem's.
func ownTools(body []byte, re string) []string {
	var out []string
	for _, m := range regexp.MustCompile(re).FindAllSubmatch(body, -1) {
		n := string(m[1])
		if !strings.HasPrefix(n, "mcp_") && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func TestClaudeOwnEditsFollowThePolicy(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, policy := range []bool{false, true} {
		name := map[bool]string{false: "control", true: "hints only"}[policy]
		t.Run(name, func(t *testing.T) {
			var edit []func(*workspace.Resolved)
			if policy {
				edit = append(edit, hintsOnly)
			}
			r := newCLIRig(t, "claude", mcpserver.Assist, edit...)
			m := newModelStandIn(t)
			run := append(append([]string{}, r.p.Launch.Argv...), "-p", "--output-format", "stream-json", "--verbose", "hello")
			body, out := r.firstRequestIn(t, m, run, `/v1/messages$`, func(b []byte) bool { return bytes.Contains(b, []byte("mcp__stem__")) }, false, "",
				"ANTHROPIC_API_KEY=sk-stem-test", "ANTHROPIC_BASE_URL="+m.URL)
			own := ownTools(body, `"name":"([A-Za-z_]+)"`)
			writes := slices.ContainsFunc(agentcli.WriteTools(agentcli.AdapterClaude), func(n string) bool { return slices.Contains(own, n) })
			if writes == policy {
				t.Fatalf("%s: claude offered its model its own tools %v (write tools present: %v)\n%.2000s", name, own, writes, out)
			}
			if !slices.Contains(own, "Read") || !bytes.Contains(body, []byte("mcp__stem__nvim_hint")) {
				t.Fatalf("%s: claude lost its read tool or stem's hints: %v", name, own)
			}
		})
	}
}

func TestGeminiOwnEditsFollowThePolicy(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, policy := range []bool{false, true} {
		name := map[bool]string{false: "control", true: "hints only"}[policy]
		t.Run(name, func(t *testing.T) {
			var edit []func(*workspace.Resolved)
			if policy {
				edit = append(edit, hintsOnly)
			}
			r := newCLIRig(t, "gemini", mcpserver.Assist, edit...)
			trust := "GEMINI_CLI_TRUST_WORKSPACE=true"
			m := newModelStandIn(t)
			run := append(append([]string{}, r.p.Launch.Argv...), "-m", "gemini-2.5-flash", "--approval-mode", "yolo", "-p", "hello")
			writeSettings(t, r)
			body, out := r.firstRequestIn(t, m, run, `:streamGenerateContent$|:generateContent$`, func(b []byte) bool { return bytes.Contains(b, []byte("mcp_stem_")) }, false, "",
				"GEMINI_API_KEY=stem-test", "GOOGLE_GEMINI_BASE_URL="+m.URL, trust)
			own := ownTools(body, `"name":\s*"([A-Za-z_]+)"`)
			writes := slices.ContainsFunc(agentcli.WriteTools(agentcli.AdapterGemini), func(n string) bool { return slices.Contains(own, n) })
			if writes == policy {
				t.Fatalf("%s: gemini offered its model its own tools %v (write tools present: %v)\n%.2000s", name, own, writes, out)
			}
			if !slices.Contains(own, "read_file") {
				t.Fatalf("%s: gemini lost read_file: %v", name, own)
			}
		})
	}
}

func TestCodexOwnEditsFollowThePolicy(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, policy := range []bool{false, true} {
		name := map[bool]string{false: "control", true: "hints only"}[policy]
		t.Run(name, func(t *testing.T) {
			var edit []func(*workspace.Resolved)
			if policy {
				edit = append(edit, hintsOnly)
			}
			r := newCLIRig(t, "codex", mcpserver.Assist, edit...)
			// The user's own configuration lets Codex write the workspace
			// (its exec default is read-only, which would prove nothing).
			os.MkdirAll(filepath.Join(r.home, ".codex"), 0o700)
			if err := os.WriteFile(filepath.Join(r.home, ".codex", "config.toml"), []byte("sandbox_mode = \"workspace-write\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			m := newModelStandIn(t)
			run := append(append([]string{}, r.p.Launch.Argv...), "-m", "gpt-5",
				"-c", "model_provider=stemtest",
				"-c", `model_providers.stemtest={name="stemtest", base_url="`+m.URL+`/v1", env_key="STEMTEST_KEY", wire_api="responses"}`,
				"exec", "--skip-git-repo-check", "hello")
			body := r.firstRequest(t, m, run, `/v1/responses$`, func(b []byte) bool { return bytes.Contains(b, []byte(`"mcp__stem"`)) }, "STEMTEST_KEY=dummy")
			// Codex tells its model the sandbox it enforces.
			m2 := regexp.MustCompile("`sandbox_mode` is `([a-z-]+)`").FindSubmatch(body)
			if m2 == nil {
				t.Fatalf("%s: codex's request names no sandbox mode: %.3000s", name, body)
			}
			want := map[bool]string{false: "workspace-write", true: "read-only"}[policy]
			if string(m2[1]) != want {
				t.Fatalf("%s: codex runs with sandbox_mode %s, want %s", name, m2[1], want)
			}
		})
	}
}

// writeSettings gives the rig's gemini an API-key login (as testGemini).
func writeSettings(t *testing.T, r *cliRig) {
	t.Helper()
	dir := filepath.Join(r.home, ".gemini")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
}
