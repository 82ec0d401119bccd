package agentcli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuiltinsWithoutConfig(t *testing.T) {
	ps, err := LoadProviders(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.Names(); !reflect.DeepEqual(got, []string{"codex", "claude", "gemini", "custom"}) {
		t.Fatalf("names %v", got)
	}
	for _, n := range []string{"codex", "claude", "gemini"} {
		p, err := ps.Get(n)
		if err != nil || p.Adapter != n || p.Command[0] != n || !strings.Contains(p.Install, "npm install -g") {
			t.Fatalf("%s: %+v %v", n, p, err)
		}
	}
	_, err = ps.Get("custom")
	if err == nil || !strings.Contains(err.Error(), "[providers.custom]") || !strings.Contains(err.Error(), "{mcp_config}") {
		t.Fatalf("custom without a command: %v", err)
	}
	_, err = ps.Get("aider")
	if err == nil || !strings.Contains(err.Error(), "codex, claude, gemini, custom") || !strings.Contains(err.Error(), "[providers.aider]") {
		t.Fatalf("unknown provider: %v", err)
	}
}

func TestConfigOverridesAndAdds(t *testing.T) {
	dir := writeConfig(t, `
[providers.codex]
args = ["--model", "o4-mini"]

[providers.custom]
command = ["/usr/local/bin/my-agent", "--mcp", "{mcp_config}"]
install = "pip install my-agent"

[providers.claude-work]
adapter = "claude"
command = ["/opt/claude/bin/claude"]
env = { CLAUDE_CONFIG_DIR = "/home/ala/.claude-work" }

[providers.echo]
command = ["echo"]
`)
	ps, err := LoadProviders(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Path != filepath.Join(dir, ConfigFile) {
		t.Fatalf("path %q", ps.Path)
	}
	codex, _ := ps.Get("codex")
	if codex.Adapter != AdapterCodex || codex.Command[0] != "codex" || !reflect.DeepEqual(codex.Args, []string{"--model", "o4-mini"}) || !codex.Builtin {
		t.Fatalf("codex %+v", codex)
	}
	custom, _ := ps.Get("custom")
	if custom.Install != "pip install my-agent" || custom.Command[2] != "{mcp_config}" {
		t.Fatalf("custom %+v", custom)
	}
	cw, _ := ps.Get("claude-work")
	if cw.Adapter != AdapterClaude || cw.Env["CLAUDE_CONFIG_DIR"] == "" || cw.Builtin {
		t.Fatalf("claude-work %+v", cw)
	}
	echo, _ := ps.Get("echo")
	if echo.Adapter != AdapterCustom {
		t.Fatalf("a provider without an adapter is custom: %+v", echo)
	}
	if got := ps.Names(); !reflect.DeepEqual(got, []string{"codex", "claude", "gemini", "custom", "claude-work", "echo"}) {
		t.Fatalf("names %v", got)
	}
}

func TestConfigMistakesAreExplained(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"[providers.x]\ncommand = [\"a\"]\nmodel = \"m\"\n", "unknown keys providers.x.model"},
		{"[providers.codex]\nadapter = \"claude\"\n", "built in with adapter codex"},
		{"[providers.x]\nadapter = \"aider\"\ncommand = [\"a\"]\n", `unknown adapter "aider"`},
		{"[providers.x]\nargs = [\"a\"]\n", "provider x has no command"},
		{"[providers.Bad_Name]\ncommand = [\"a\"]\n", `provider name "Bad_Name"`},
		{"[providers.x]\ncommand = [\"\"]\n", "empty program"},
		{"[providers.x\n", ConfigFile},
	} {
		_, err := LoadProviders(writeConfig(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

func TestMissingProgramNamesWhatToInstall(t *testing.T) {
	ps, _ := LoadProviders(t.TempDir())
	for _, n := range []string{"codex", "claude", "gemini"} {
		p, _ := ps.Get(n)
		_, err := p.Binary(t.TempDir())
		var me *MissingError
		if !errors.As(err, &me) {
			t.Fatalf("%s: %v", n, err)
		}
		pkg := map[string]string{"codex": "@openai/codex", "claude": "@anthropic-ai/claude-code", "gemini": "@google/gemini-cli"}[n]
		if !strings.Contains(err.Error(), `program "`+n+`" not found in PATH`) || !strings.Contains(err.Error(), pkg) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	// Found in PATH; an absolute path that is not executable is missing.
	dir := t.TempDir()
	bin := filepath.Join(dir, "codex")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	p, _ := ps.Get("codex")
	if got, err := p.Binary("/nonexistent:" + dir); err != nil || got != bin {
		t.Fatalf("Binary = %q, %v", got, err)
	}
	os.Chmod(bin, 0o644)
	if _, err := p.Binary(dir); err == nil {
		t.Fatal("a non-executable file was accepted")
	}
	p.Command = []string{bin}
	if _, err := p.Binary(""); err == nil || !strings.Contains(err.Error(), bin) || strings.Contains(err.Error(), "in PATH") {
		t.Fatalf("absolute path: %v", err)
	}
}
