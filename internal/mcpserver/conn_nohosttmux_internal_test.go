package mcpserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
)

// With no tmux on the host, stem-mcp runs the container's tmux client (the
// container always has one) instead of failing.
func TestNoHostTmuxFallback(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	realTmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "podman-calls")
	podman := writeScript(t, filepath.Join(dir, "podman"), `printf '%s\n' "$*" >> `+calls+`
[ "$1" = exec ] && [ "$2" = -i ] && [ "$3" = "`+in.Record.ContainerID+`" ] && [ "$4" = tmux ] || { echo "unexpected podman call: $*" >&2; exit 125; }
shift 4
exec `+realTmux+` "$@"
`)
	in.Tmux(t, "send-keys", "-t", "stem:shell", "echo NOHOST-$((6*7))", "Enter")
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))

	s, log := inProcess(t, in, Observe, programs{tmux: filepath.Join(dir, "no-such-tmux"), podman: podman})
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, etext := callTool(t, s, "pane_capture", map[string]any{"pane": pane})
		if etext != "" {
			t.Fatalf("pane_capture without a host tmux: %s\nserver log:\n%s", etext, log.String())
		}
		if strings.Contains(str(out["text"]), "NOHOST-42") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane_capture never showed the echo: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "no tmux client on this host") {
		t.Errorf("server log does not say why it switched clients:\n%s", log.String())
	}
	if got, _ := os.ReadFile(calls); !strings.Contains(string(got), "-C attach-session") {
		t.Errorf("the control client did not run through podman exec:\n%s", got)
	}
}
