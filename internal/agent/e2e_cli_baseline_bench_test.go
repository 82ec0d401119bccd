package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// The CLI's own share of BenchmarkSandboxedAgentStart, paired under the
// same load: Claude Code started in a tmux window on the host (no stem, no
// Podman), then the same in a running agent's sandbox (podman exec, as the
// sandbox user), each in a fresh home with its first-run dialogs answered
// as stem answers them, to the moment it starts its MCP server (a probe
// that makes a file).
func BenchmarkClaudeToMCPHostAndSandbox(b *testing.B) {
	testenv.Require(b, "tmux", "node")
	bin := clitest.Bin(b, "claude")
	ba := newBoxAccountTB(b, modelserver.Say("ok"))
	ba.must("up", "native-amd64", "demo", "hello", "1")
	st := ba.status(nativeInst)
	rec := ba.start("claude", "--background")
	ba.waitReady(st, rec)
	boxHome := filepath.Join(rec.Dir, "home") // the sandbox's /home/agent
	fi, err := os.Stat(boxHome)
	if err != nil {
		b.Fatal(err)
	}
	uid, gid := int(fi.Sys().(*syscall.Stat_t).Uid), int(fi.Sys().(*syscall.Stat_t).Gid)

	dir := b.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	key := "sk-ant-stem-test-0123456789abcdefghij"
	seed := func(card string) []byte {
		data, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true,
			"projects":              map[string]any{card: map[string]any{"hasTrustDialogAccepted": true}},
			"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}}})
		return data
	}
	probeConf := func(path, probe string) {
		mcp, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"probe": map[string]any{"command": "sh", "args": []string{"-c", "touch " + probe + "; exec sleep 60"}}}})
		os.WriteFile(path, mcp, 0o644)
	}
	probeConf(filepath.Join(dir, "mcp.json"), filepath.Join(dir, "spawned"))
	probeConf(filepath.Join(boxHome, "probe.json"), filepath.Join(sandbox.Home, "spawned"))
	// The environment stem gives Claude in the sandbox, less the proxy;
	// the model's address refuses connections.
	env := []string{"DISABLE_AUTOUPDATER=1", "ENABLE_TOOL_SEARCH=false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"ANTHROPIC_API_KEY=" + key, "ANTHROPIC_BASE_URL=http://127.0.0.1:9"}
	// A window whose CLI ended stays, so a failure shows why.
	conf := filepath.Join(dir, "tmux.conf")
	os.WriteFile(conf, []byte("set -g remain-on-exit on\n"), 0o600)
	n := 0
	// launch runs argv in a new tmux server (a server per start: a new
	// session on a server that kill-server is still ending would meet it
	// exiting) and waits for probe.
	launch := func(argv []string, probe string) time.Duration {
		n++
		sock := filepath.Join(dir, "t"+strconv.Itoa(n)+".sock")
		tmux := func(args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, _ := exec.CommandContext(ctx, "tmux", append([]string{"-S", sock, "-f", conf}, args...)...).CombinedOutput()
			return string(out)
		}
		defer tmux("kill-server")
		os.Remove(probe)
		t0 := time.Now()
		if out := tmux(append([]string{"new-session", "-d", "-x", "80", "-y", "24", "-c", work}, argv...)...); out != "" {
			b.Fatalf("tmux new-session: %s", out)
		}
		deadline := t0.Add(60 * time.Second)
		for {
			if _, err := os.Stat(probe); err == nil {
				return time.Since(t0)
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s started no MCP server within 60 s; its window:\n%s", argv[0], tmux("capture-pane", "-p"))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var host, box []time.Duration
	for i := 0; b.Loop(); i++ {
		home := filepath.Join(dir, "home", strconv.Itoa(i))
		os.MkdirAll(home, 0o700)
		os.WriteFile(filepath.Join(home, ".claude.json"), seed(work), 0o600)
		argv := append(append([]string{"env", "HOME=" + home}, env...), bin, "--strict-mcp-config", "--mcp-config", filepath.Join(dir, "mcp.json"))
		host = append(host, launch(argv, filepath.Join(dir, "spawned")))

		rel := filepath.Join("bench", strconv.Itoa(i))
		os.MkdirAll(filepath.Join(boxHome, rel), 0o755)
		os.WriteFile(filepath.Join(boxHome, rel, ".claude.json"), seed(st.Record.CardPath), 0o644)
		for _, p := range []string{filepath.Join(boxHome, "bench"), filepath.Join(boxHome, rel), filepath.Join(boxHome, rel, ".claude.json")} {
			os.Lchown(p, uid, gid)
		}
		argv = []string{"podman", "exec", "-it", "-w", st.Record.CardPath, "-e", "HOME=" + filepath.Join(sandbox.Home, rel)}
		for _, e := range env {
			argv = append(argv, "-e", e)
		}
		argv = append(argv, rec.Sandbox, "claude", "--strict-mcp-config", "--mcp-config", filepath.Join(sandbox.Home, "probe.json"))
		box = append(box, launch(argv, filepath.Join(boxHome, "spawned")))
	}
	b.ReportMetric(float64(median(host).Milliseconds()), "host-to-mcp-p50-ms")
	b.ReportMetric(float64(median(box).Milliseconds()), "sandbox-to-mcp-p50-ms")
	b.ReportMetric(float64(maxOf(host).Milliseconds()), "host-to-mcp-max-ms")
	b.ReportMetric(float64(maxOf(box).Milliseconds()), "sandbox-to-mcp-max-ms")
}
