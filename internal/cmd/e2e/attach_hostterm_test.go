package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// attachedInstance makes the demo instance and returns its name, tmux
// socket and container id.
func attachedInstance(t *testing.T, a *account) (inst, sock, cid string) {
	t.Helper()
	inst = "native-amd64-demo-hello-t1"
	a.must(0, "up", "native-amd64", "demo", "hello", "1")
	var st struct {
		Record struct {
			SocketDir   string `json:"socket_dir"`
			ContainerID string `json:"container_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(a.must(0, "status", inst, "--json").Stdout), &st); err != nil {
		t.Fatal(err)
	}
	return inst, filepath.Join(st.Record.SocketDir, "t.sock"), st.Record.ContainerID
}

// tmuxOut runs the host's tmux, as the account's user, against the
// container's server.
func (a *account) tmuxOut(sock string, args ...string) string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := a.host(ctx, "tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
	if err != nil {
		a.t.Fatalf("tmux %v: %v %s", args, err, out)
	}
	return string(out)
}

// clientCount is how many clients not in control mode the container's
// tmux has.
func (a *account) clientCount(sock string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := a.host(ctx, "tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode}").Output()
	return strings.Count(string(out), "0")
}

func clientCount(sock string) func() int {
	return func() int {
		out, _ := exec.Command("tmux", "-S", sock, "list-clients", "-F", "#{client_control_mode}").Output()
		return strings.Count(string(out), "0")
	}
}

// TestAttachGuardsTheHostTerminal: a program in a pane, with tmux's
// passthrough and clipboard on, writes an OSC 52 clipboard string, a DCS
// through passthrough and a title report query. Two clients watch the same
// window: `stemctl attach` (whose terminal must get none of it) and, as the
// control, a plain `podman exec -it ... tmux attach` (whose terminal gets
// all of it). It runs rootful and rootless.
func TestAttachGuardsTheHostTerminal(t *testing.T) {
	for _, mode := range podmanModes {
		t.Run(mode, func(t *testing.T) { guardFlow(t, modeAccount(t, mode)) })
	}
}

func guardFlow(t *testing.T, a *account) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, sock, cid := attachedInstance(t, a)
	a.tmuxOut(sock, "set-option", "-g", "set-clipboard", "on")
	a.tmuxOut(sock, "set-option", "-g", "allow-passthrough", "on")

	guarded := a.Command(ctx, filepath.Join(a.Bin, "stemctl"), "attach", inst)
	gf, err := pty.StartWithSize(guarded, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { guarded.Process.Kill(); guarded.Wait(); gf.Close() }()
	gscreen := record(gf)
	waitFor(t, 20*time.Second, "stemctl's client attached", func() bool { return a.clientCount(sock) == 1 })

	plain := a.host(ctx, "podman", "exec", "-it", "-e", "TERM=xterm-256color", cid, "tmux", "-S", sock, "attach-session", "-t", "stem")
	pf, err := pty.StartWithSize(plain, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait(); pf.Close() }()
	pscreen := record(pf)
	waitFor(t, 20*time.Second, "the control client attached", func() bool { return a.clientCount(sock) == 2 })

	// The host line's row is the relay's: tmux sizes stemctl's client to
	// 29 rows, the plain one to 30.
	heights := a.tmuxOut(sock, "list-clients", "-F", "#{client_height}")
	if !strings.Contains(heights, "29\n") || !strings.Contains(heights, "30\n") {
		t.Fatalf("client heights %q: want 29 (stemctl) and 30 (plain)", heights)
	}

	clip := base64.StdEncoding.EncodeToString([]byte("stem-canary-osc52-direct"))
	pass := base64.StdEncoding.EncodeToString([]byte("stem-canary-osc52-passthrough"))
	// The program prints the sequences only once both terminals show the
	// new window: tmux writes them to a client only when it has no redraw
	// pending, and a client still drawing the new window would miss them.
	script := `printf 'READY%s\n' now; read _; ` +
		`printf '\033]52;c;` + clip + `\007'; ` +
		`printf '\033Ptmux;\033\033]52;c;` + pass + `\007\033\\'; ` +
		`printf '\033Ptmux;\033\033P$qm\033\033\\\033\\'; ` +
		`printf '\033Ptmux;\033\033[21t\033\\'; ` +
		`printf 'MARK%s\n' done; sleep 600`
	pane := strings.TrimSpace(a.tmuxOut(sock, "new-window", "-P", "-F", "#{pane_id}", "sh", "-c", script))
	waitFor(t, 20*time.Second, "the control's terminal shows the new window", pscreen.shows("READYnow"))
	waitFor(t, 20*time.Second, "stemctl's terminal shows the new window", gscreen.shows("READYnow"))
	a.tmuxOut(sock, "send-keys", "-t", pane, "Enter")
	waitFor(t, 20*time.Second, "the control's terminal shows the pane's output", pscreen.shows("MARKdone"))
	waitFor(t, 20*time.Second, "stemctl's terminal shows the pane's output", gscreen.shows("MARKdone"))

	hostile := map[string]string{
		"OSC 52 written in the pane":       clip,
		"OSC 52 through passthrough":       pass,
		"DECRQSS through passthrough":      "\x1bP$q",
		"title report through passthrough": "\x1b[21t",
	}
	for what, canary := range hostile {
		if !pscreen.shows(canary)() {
			t.Errorf("control: %s did not reach the plain client's terminal; the attack is not exercised", what)
		}
		if gscreen.shows(canary)() {
			t.Errorf("%s reached the terminal of stemctl attach", what)
		}
	}
	if !gscreen.shows("stem ▸ " + inst)() {
		t.Errorf("stemctl's terminal has no host line naming %s", inst)
	}
}
