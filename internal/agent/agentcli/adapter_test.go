package agentcli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/mcpconfig"
)

const testDir = "/run/user/1000/stem/agents/0a1b2c"

// A context with everything that needs escaping in TOML, JSON and argv.
const trickyContext = "# stem context\nquote \" backslash \\ tab \t ünïcödé <&> $(echo no) `no`\n"

func testSession(adapter string, command ...string) Session {
	if len(command) == 0 {
		command = []string{adapter}
	}
	return Session{
		ID:       "0a1b2c",
		Provider: Provider{Name: adapter, Adapter: adapter, Command: command, Args: []string{"--model", "m1"}},
		Binary:   "/opt/bin/" + filepath.Base(command[0]),
		Level:    "assist",
		Instance: "hazard3-sim-inf-bss-t4",
		Server: mcpconfig.Entry{
			Name:    "stem",
			Command: "/usr/local/bin/stem-mcp",
			Args:    []string{"serve", "--level", "assist", "--instance", "hazard3-sim-inf-bss-t4"},
			Env:     map[string]string{"HOME": "/home/ala", "XDG_RUNTIME_DIR": "/run/user/1000"},
		},
		Context:     trickyContext,
		ContextFile: testDir + "/context.md",
		ContextJSON: testDir + "/context.json",
		MCPConfig:   testDir + "/mcp.json",
		Dir:         testDir,
		CardPath:    "/home/ala/dev/workspace/stem/inf/bss",
		TaskDir:     "/home/ala/dev/workspace/stem/inf/bss/t4",
		Extra:       []string{"--", "hello there"},
	}
}

func wantCommonEnv(s Session) map[string]string {
	return map[string]string{
		"STEM_AGENT": s.Provider.Name, "STEM_MCP": "1", "STEM_INSTANCE": "hazard3-sim-inf-bss-t4",
		"STEM_AGENT_ID": "0a1b2c", "STEM_AGENT_LEVEL": s.Level,
		"STEM_AGENT_CONTEXT": testDir + "/context.md", "STEM_MCP_CONFIG": testDir + "/mcp.json",
	}
}

// The neutral MCP file every provider gets, byte for byte.
const wantNeutral = `{
  "mcpServers": {
    "stem": {
      "command": "/usr/local/bin/stem-mcp",
      "args": [
        "serve",
        "--level",
        "assist",
        "--instance",
        "hazard3-sim-inf-bss-t4"
      ],
      "env": {
        "HOME": "/home/ala",
        "XDG_RUNTIME_DIR": "/run/user/1000"
      }
    }
  }
}
`

func checkCommon(t *testing.T, s Session, l Launch) {
	t.Helper()
	for k, v := range wantCommonEnv(s) {
		if l.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, l.Env[k], v)
		}
	}
	if got := string(l.Files["context.md"]); got != trickyContext {
		t.Errorf("context.md = %q", got)
	}
	if got := string(l.Files["mcp.json"]); got != wantNeutral {
		t.Errorf("mcp.json:\n%s\nwant:\n%s", got, wantNeutral)
	}
}

func TestCodexCommandLine(t *testing.T) {
	s := testSession("codex")
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/opt/bin/codex",
		"-c", `mcp_servers.stem.command="/usr/local/bin/stem-mcp"`,
		"-c", `mcp_servers.stem.args=["serve", "--level", "assist", "--instance", "hazard3-sim-inf-bss-t4"]`,
		"-c", `mcp_servers.stem.env={ HOME = "/home/ala", XDG_RUNTIME_DIR = "/run/user/1000" }`,
		"-c", "mcp_servers.stem.startup_timeout_sec=30",
		"-c", "mcp_servers.stem.tool_timeout_sec=660",
		"-c", `developer_instructions="# stem context\nquote \" backslash \\ tab \t ünïcödé <&> $(echo no) ` + "`no`" + `\n"`,
		"--model", "m1", "--", "hello there",
	}
	if !reflect.DeepEqual(l.Argv, want) {
		t.Fatalf("argv:\n%q\nwant:\n%q", l.Argv, want)
	}
	checkCommon(t, s, l)
	if len(l.Files) != 2 {
		t.Errorf("codex writes no files of its own, got %v", keys(l.Files))
	}
	// Every -c value is TOML that decodes to exactly what was meant.
	var doc struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
		} `toml:"mcp_servers"`
		DeveloperInstructions string `toml:"developer_instructions"`
	}
	var b strings.Builder
	for i := 0; i < len(l.Argv); i++ {
		if l.Argv[i] == "-c" {
			k, v, _ := strings.Cut(l.Argv[i+1], "=")
			b.WriteString(k + " = " + v + "\n")
		}
	}
	if _, err := toml.Decode(b.String(), &doc); err != nil {
		t.Fatalf("the -c values are not TOML: %v\n%s", err, b.String())
	}
	srv := doc.MCPServers["stem"]
	if srv.Command != s.Server.Command || !reflect.DeepEqual(srv.Args, s.Server.Args) || !reflect.DeepEqual(srv.Env, s.Server.Env) {
		t.Fatalf("decoded server %+v", srv)
	}
	if doc.DeveloperInstructions != trickyContext {
		t.Fatalf("developer_instructions decoded to %q", doc.DeveloperInstructions)
	}

	s.Level = "observe"
	l, _ = Plan(s)
	if !containsSeq(l.Argv, "--sandbox", "read-only") {
		t.Fatalf("observe: codex should be read-only: %q", l.Argv)
	}
}

func TestClaudeCommandLineAndFile(t *testing.T) {
	s := testSession("claude")
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/bin/claude", "--mcp-config=" + testDir + "/claude-mcp.json", "--append-system-prompt-file", testDir + "/context.md",
		"--model", "m1", "--", "hello there"}
	if !reflect.DeepEqual(l.Argv, want) {
		t.Fatalf("argv:\n%q\nwant:\n%q", l.Argv, want)
	}
	checkCommon(t, s, l)
	wantFile := `{
  "mcpServers": {
    "stem": {
      "type": "stdio",
      "command": "/usr/local/bin/stem-mcp",
      "args": [
        "serve",
        "--level",
        "assist",
        "--instance",
        "hazard3-sim-inf-bss-t4"
      ],
      "env": {
        "HOME": "/home/ala",
        "XDG_RUNTIME_DIR": "/run/user/1000"
      }
    }
  }
}
`
	if got := string(l.Files["claude-mcp.json"]); got != wantFile {
		t.Fatalf("claude-mcp.json:\n%s\nwant:\n%s", got, wantFile)
	}
	s.Level = "observe"
	l, _ = Plan(s)
	if !containsSeq(l.Argv, "--permission-mode", "plan") {
		t.Fatalf("observe: claude should plan only: %q", l.Argv)
	}
}

func TestGeminiCommandLineEnvAndFiles(t *testing.T) {
	s := testSession("gemini")
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/bin/gemini", "--model", "m1", "--", "hello there"}; !reflect.DeepEqual(l.Argv, want) {
		t.Fatalf("argv %q, want %q", l.Argv, want)
	}
	checkCommon(t, s, l)
	if got := l.Env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]; got != testDir+"/gemini/system-defaults.json" {
		t.Fatalf("GEMINI_CLI_SYSTEM_DEFAULTS_PATH = %q", got)
	}
	wantSettings := `{
  "context": {
    "includeDirectories": [
      "/run/user/1000/stem/agents/0a1b2c/gemini/context"
    ],
    "loadMemoryFromIncludeDirectories": true
  },
  "mcpServers": {
    "stem": {
      "args": [
        "serve",
        "--level",
        "assist",
        "--instance",
        "hazard3-sim-inf-bss-t4"
      ],
      "command": "/usr/local/bin/stem-mcp",
      "env": {
        "HOME": "/home/ala",
        "XDG_RUNTIME_DIR": "/run/user/1000"
      },
      "timeout": 660000
    }
  }
}
`
	if got := string(l.Files["gemini/system-defaults.json"]); got != wantSettings {
		t.Fatalf("system-defaults.json:\n%s\nwant:\n%s", got, wantSettings)
	}
	if got := string(l.Files["gemini/context/GEMINI.md"]); got != trickyContext {
		t.Fatalf("GEMINI.md = %q", got)
	}
	s.Level = "observe"
	l, _ = Plan(s)
	if !containsSeq(l.Argv, "--approval-mode", "plan") {
		t.Fatalf("observe: gemini should plan only: %q", l.Argv)
	}
}

func TestCustomCommandLinePlaceholders(t *testing.T) {
	s := testSession("custom", "/usr/local/bin/my-agent", "--mcp", "{mcp_config}", "--ctx={context}", "{instance}@{level}", "{agent_id}", "{card}", "{task_dir}", "{context_json}", "{stem_mcp}")
	s.Provider.Args = []string{"--seen-by", "{agent_id}"}
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/bin/my-agent", "--mcp", testDir + "/mcp.json", "--ctx=" + testDir + "/context.md",
		"hazard3-sim-inf-bss-t4@assist", "0a1b2c", "/home/ala/dev/workspace/stem/inf/bss", "/home/ala/dev/workspace/stem/inf/bss/t4",
		testDir + "/context.json", "/usr/local/bin/stem-mcp", "--seen-by", "0a1b2c", "--", "hello there"}
	if !reflect.DeepEqual(l.Argv, want) {
		t.Fatalf("argv:\n%q\nwant:\n%q", l.Argv, want)
	}
	checkCommon(t, s, l)
	if len(l.Files) != 2 {
		t.Errorf("custom writes only the common files, got %v", keys(l.Files))
	}
	// Placeholders in the student's own arguments are not expanded.
	s.Extra = []string{"{context}"}
	l, _ = Plan(s)
	if l.Argv[len(l.Argv)-1] != "{context}" {
		t.Fatalf("extra argument expanded: %q", l.Argv)
	}
	s.Provider.Command = []string{"x", "{nope}"}
	if _, err := Plan(s); err == nil || !strings.Contains(err.Error(), "{nope}") || !strings.Contains(err.Error(), "{mcp_config}") {
		t.Fatalf("unknown placeholder: %v", err)
	}
}

func TestProviderEnvCannotReplaceStemVariables(t *testing.T) {
	s := testSession("custom", "agent")
	s.Provider.Env = map[string]string{"STEM_INSTANCE": "other", "MY_VAR": "1"}
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if l.Env["STEM_INSTANCE"] != "hazard3-sim-inf-bss-t4" || l.Env["MY_VAR"] != "1" {
		t.Fatalf("env %v", l.Env)
	}
}

func TestInvalidServerRefused(t *testing.T) {
	s := testSession("codex")
	s.Server.Args = append(s.Server.Args, "a\nb")
	if _, err := Plan(s); err == nil {
		t.Fatal("a newline in an argument was accepted")
	}
}

// Precheck makes, from the configuration alone, the refusals Plan would
// make later: agent start runs it before it starts a container.
func TestPrecheckRefusesWhatPlanWould(t *testing.T) {
	private := t.TempDir()
	os.Chmod(private, 0o700)
	worldWritable := "/tmp/stem/agents" // /tmp is 1777
	for _, c := range []struct {
		p    Provider
		root string
		want string
	}{
		{Provider{Name: "c", Adapter: AdapterCustom, Command: []string{"x", "--cfg", "{mcp_config}"}, Args: []string{"{level}"}}, worldWritable, ""},
		{Provider{Name: "c", Adapter: AdapterCustom, Command: []string{"x", "--cfg={mcp_cfg}"}}, private, "unknown placeholder {mcp_cfg}"},
		{Provider{Name: "c", Adapter: AdapterCustom, Command: []string{"x"}, Args: []string{"{nope}"}}, private, "unknown placeholder {nope}"},
		{Provider{Name: "g", Adapter: AdapterGemini, Command: []string{"gemini"}}, worldWritable, "Gemini CLI ignores settings files there"},
		{Provider{Name: "x", Adapter: AdapterCodex, Command: []string{"codex", "{not_custom}"}}, worldWritable, ""},
		{Provider{Name: "a", Adapter: "aider", Command: []string{"aider"}}, private, `unknown adapter "aider"`},
	} {
		err := Precheck(c.p, c.root)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v under %s: %v, want %q", c.p, c.root, err, c.want)
		}
		if c.p.Adapter == AdapterCustom {
			s := testSession("custom", "agent")
			s.Provider = c.p
			if _, perr := Plan(s); (perr == nil) != (err == nil) {
				t.Errorf("%+v: Precheck says %v, Plan %v", c.p, err, perr)
			}
		}
	}
}

func TestCheckSettingsDir(t *testing.T) {
	tmp := t.TempDir() // under /tmp: world-writable
	err := CheckSettingsDir(filepath.Join(tmp, "stem", "agents"))
	if err == nil || !strings.Contains(err.Error(), "XDG_RUNTIME_DIR") {
		t.Fatalf("a directory under /tmp passed: %v", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	if fi, err := os.Stat(home); err == nil && fi.Mode().Perm()&0o022 == 0 {
		if err := CheckSettingsDir(filepath.Join(home, "nonexistent", "x")); err != nil {
			t.Fatalf("a private directory refused: %v", err)
		}
	}
}

func containsSeq(a []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(a); i++ {
		if reflect.DeepEqual(a[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// In the sandbox Gemini CLI runs as one Node.js process with a heap below
// the sandbox's memory limit, and does not try its usage statistics or
// update check (the proxy would only refuse them); on the host it keeps
// its own settings.
func TestGeminiSandboxStartSettings(t *testing.T) {
	env := SandboxEnv(AdapterGemini)
	if env["GEMINI_CLI_NO_RELAUNCH"] == "" {
		t.Fatalf("gemini in the sandbox relaunches itself: %v", env)
	}
	var heap int
	if _, err := fmt.Sscanf(env["NODE_OPTIONS"], "--max-old-space-size=%d", &heap); err != nil || heap <= 0 || heap >= sandbox.MemoryMiB {
		t.Fatalf("NODE_OPTIONS %q: want a heap below the sandbox's %d MiB", env["NODE_OPTIONS"], sandbox.MemoryMiB)
	}
	for _, other := range []string{AdapterClaude, AdapterCodex} {
		if v, ok := SandboxEnv(other)["NODE_OPTIONS"]; ok {
			t.Fatalf("%s gets gemini's NODE_OPTIONS %q", other, v)
		}
	}
	s := testSession("gemini")
	s.Sandboxed = true
	l, err := Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		Privacy struct{ UsageStatisticsEnabled *bool }
		General struct{ EnableAutoUpdate, EnableAutoUpdateNotification *bool }
	}
	if err := json.Unmarshal(l.Files[GeminiDefaults], &settings); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*bool{"privacy.usageStatisticsEnabled": settings.Privacy.UsageStatisticsEnabled,
		"general.enableAutoUpdate": settings.General.EnableAutoUpdate, "general.enableAutoUpdateNotification": settings.General.EnableAutoUpdateNotification} {
		if v == nil || *v {
			t.Fatalf("sandboxed gemini settings: %s not false:\n%s", name, l.Files[GeminiDefaults])
		}
	}
}

// The agent image fills Node's compile cache for Gemini CLI as the
// sandbox's user and with the NODE_OPTIONS stem gives Gemini there: Node
// keys the cache by the uid and the V8 flags, so any difference leaves it
// unused (and the CLI compiles its bundle at every start again).
func TestGeminiCompileCacheMatchesSandbox(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "containers", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions with their continuation lines joined.
	var instrs []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			cur += body
			continue
		}
		instrs = append(instrs, strings.Join(strings.Fields(cur+line), " "))
		cur = ""
	}
	user, fill := "", ""
	for _, in := range instrs {
		if u, ok := strings.CutPrefix(in, "USER "); ok {
			user = u
		}
		if strings.HasPrefix(in, "RUN ") && strings.Contains(in, "compile-cache.mjs") {
			fill = in
			break
		}
	}
	if fill == "" {
		t.Fatal("the Containerfile fills no compile cache (compile-cache.mjs)")
	}
	if want := fmt.Sprintf("%d:%d", sandbox.AgentUID, sandbox.AgentUID); user != want {
		t.Errorf("the compile cache is filled as USER %q, the sandbox runs as %s", user, want)
	}
	if want := "NODE_OPTIONS=" + SandboxEnv(AdapterGemini)["NODE_OPTIONS"]; !slices.Contains(strings.Fields(fill), want) {
		t.Errorf("the compile cache is filled without the sandbox's %s:\n%s", want, fill)
	}
}
