package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/testenv"
)

// The CLI's own share of BenchmarkSandboxedAgentStart: Claude Code started
// on the host (no stem, no sandbox, no Podman) in a tmux window, in a fresh
// home with its first-run dialogs answered as stem answers them, to the
// moment it starts its MCP server (a probe that makes a file).
func BenchmarkClaudeOnHostToMCP(b *testing.B) {
	testenv.Require(b, "tmux", "node")
	bin := clitest.Bin(b, "claude")
	dir := b.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	probe := filepath.Join(dir, "spawned")
	mcp, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"probe": map[string]any{"command": "sh", "args": []string{"-c", "touch " + probe + "; exec sleep 60"}}}})
	os.WriteFile(filepath.Join(dir, "mcp.json"), mcp, 0o600)
	key := "sk-ant-stem-test-0123456789abcdefghij"
	seed, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true,
		"projects":              map[string]any{work: map[string]any{"hasTrustDialogAccepted": true}},
		"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}}})
	// A server per start: a new session on a server that kill-server is
	// still ending would meet it exiting.
	var sock string
	// A window whose CLI ended stays, so a failure shows why.
	conf := filepath.Join(dir, "tmux.conf")
	os.WriteFile(conf, []byte("set -g remain-on-exit on\n"), 0o600)
	tmux := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, "tmux", append([]string{"-S", sock, "-f", conf}, args...)...).CombinedOutput()
		return string(out)
	}
	defer tmux("kill-server")
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		home := filepath.Join(dir, "home", strconv.Itoa(i))
		os.MkdirAll(home, 0o700)
		os.WriteFile(filepath.Join(home, ".claude.json"), seed, 0o600)
		os.Remove(probe)
		sock = filepath.Join(dir, "t"+strconv.Itoa(i)+".sock")
		t0 := time.Now()
		// The environment stem gives Claude in the sandbox, less the proxy;
		// the model's address refuses connections.
		started := tmux("new-session", "-d", "-x", "80", "-y", "24", "-c", work, "env", "HOME="+home, "DISABLE_AUTOUPDATER=1",
			"ENABLE_TOOL_SEARCH=false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ANTHROPIC_API_KEY="+key,
			"ANTHROPIC_BASE_URL=http://127.0.0.1:9", bin, "--strict-mcp-config", "--mcp-config", filepath.Join(dir, "mcp.json"))
		if started != "" {
			b.Fatalf("tmux new-session: %s", started)
		}
		deadline := t0.Add(60 * time.Second)
		for {
			if _, err := os.Stat(probe); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("claude on the host started no MCP server within 60 s; its window:\n%s", tmux("capture-pane", "-p"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		tmux("kill-server")
		b.StartTimer()
	}
	b.ReportMetric(float64(median(ds).Milliseconds()), "launch-to-mcp-p50-ms")
	b.ReportMetric(float64(maxOf(ds).Milliseconds()), "launch-to-mcp-max-ms")
}
