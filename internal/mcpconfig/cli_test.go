package mcpconfig

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
)

// runCLI runs an agent CLI with a private HOME and returns its output
// (stdout and stderr: gemini prints its list on stderr).
func runCLI(t *testing.T, home string, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "CI=1"}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), args, err, out, stderr.String())
	}
	if strings.Contains(strings.Join(args, " "), "--json") {
		return string(out)
	}
	return string(out) + stderr.String()
}

// The real CLIs read what the writers merged, next to entries they did not
// write, with exactly the command and arguments written.
func TestRealCLIsReadMergedEntries(t *testing.T) {
	tricky := Entry{Name: "stem-anna", Command: "ssh", Args: append(append([]string{}, anna.Args[:len(anna.Args)-1]...), "native-amd64-inf-bss-t5")}

	t.Run("codex", func(t *testing.T) {
		codex := clitest.Bin(t, "codex")
		home := t.TempDir()
		codexHome := filepath.Join(home, "codex")
		cfg := filepath.Join(codexHome, "config.toml")
		if err := os.MkdirAll(codexHome, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte(codexWithOthers), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Codex.MergeFile(cfg, anna); err != nil {
			t.Fatal(err)
		}
		if err := Codex.MergeFile(cfg, tricky); err != nil { // replace
			t.Fatal(err)
		}
		env := []string{"CODEX_HOME=" + codexHome}
		var got struct {
			Transport struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"transport"`
		}
		out := runCLI(t, home, env, codex, "mcp", "get", "stem-anna", "--json")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("codex mcp get --json: %v\n%s", err, out)
		}
		if got.Transport.Command != tricky.Command || !reflect.DeepEqual(got.Transport.Args, tricky.Args) {
			t.Fatalf("codex read %+v, want %v %v", got.Transport, tricky.Command, tricky.Args)
		}
		list := runCLI(t, home, env, codex, "mcp", "list")
		if !strings.Contains(list, "docs") || !strings.Contains(list, "stem-anna") {
			t.Fatalf("codex mcp list lost an entry:\n%s", list)
		}
	})

	t.Run("gemini", func(t *testing.T) {
		gemini := clitest.Bin(t, "gemini")
		home := t.TempDir()
		cfg := filepath.Join(home, ".gemini", "settings.json")
		if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
			t.Fatal(err)
		}
		orig := "{\n  // kept\n  \"mcpServers\": {\n    \"docs\": {\"command\": \"npx\", \"args\": [\"docs-mcp\"]}\n  }\n}\n"
		if err := os.WriteFile(cfg, []byte(orig), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Gemini.MergeFile(cfg, tricky); err != nil {
			t.Fatal(err)
		}
		out := runCLI(t, home, nil, gemini, "mcp", "list")
		want := "stem-anna: " + tricky.Command + " " + strings.Join(tricky.Args, " ") + " (stdio)"
		if !strings.Contains(out, want) || !strings.Contains(out, "docs: npx docs-mcp (stdio)") {
			t.Fatalf("gemini mcp list:\n%s\nwant a line with %q and the docs entry", out, want)
		}
	})

	t.Run("claude", func(t *testing.T) {
		claude := clitest.Bin(t, "claude")
		home := t.TempDir()
		proj := filepath.Join(home, "proj")
		if err := os.MkdirAll(proj, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := Claude.MergeFile(filepath.Join(proj, ".mcp.json"), tricky); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(claude, "mcp", "get", "stem-anna")
		cmd.Dir = proj
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude mcp get: %v\n%s", err, out)
		}
		for _, want := range []string{"Command: ssh", "Args: " + strings.Join(tricky.Args, " ")} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("claude mcp get stem-anna:\n%s\nwant %q", out, want)
			}
		}
	})
}
