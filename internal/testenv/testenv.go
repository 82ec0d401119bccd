// Package testenv builds real instance fixtures for tests of stem-mcp and
// the SSH gate: private XDG directories, a copy of an example card, a real
// Podman container carrying the instance labels (so every verification step
// runs for real), and real tmux and Neovim servers on the fixture's socket
// paths, laid out as the container entrypoint lays them out (session "stem",
// window "edit" running nvim, window "shell" running bash with stem's prompt
// integration).
//
// The servers run on the host rather than inside the container so the
// fixture needs only the base image; end-to-end tests with the profile
// images use stemctl itself.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv/leftover"
	"github.com/stem-edu/stem/internal/testenv/needs"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// BaseImage is the image fixture containers run (only `sleep` is needed).
const BaseImage = "localhost/stem-base:bookworm"

// Options choose the task; zero values pick native-amd64 demo hello 1.
type Options struct {
	Profile, Series, Card, Task string
	// Runtime reuses an existing fixture's runtime/state dirs (a second
	// instance on the same account).
	Share *Instance
}

// Instance is a running fixture.
type Instance struct {
	Name     string
	Dirs     xdg.Dirs
	Layout   sockets.Layout
	Dir      sockets.Dir
	Record   registry.Record
	Resolved *workspace.Resolved
	// Env is the environment a stem process needs to see this account.
	Env []string
	// Container is the Podman container's name.
	Container string

	nvimCmd, bashCmd string
	shellEnv         []string
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Require skips the test under -short and fails it with what to install
// when a program is missing.
func Require(t testing.TB, programs ...string) {
	t.Helper()
	pkgs := map[string]string{"tmux": "tmux", "nvim": "neovim", "podman": "podman", "bash": "bash", "gdb": "gdb", "sshd": "openssh-server", "ssh": "openssh-client"}
	for _, p := range programs {
		pkg := pkgs[p]
		if pkg == "" {
			pkg = p
		}
		needs.Program(t, p, pkg)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// New starts a fixture and registers its cleanup.
func New(t testing.TB, opt Options) *Instance {
	t.Helper()
	Require(t, "podman", "tmux", "nvim", "bash")
	leftover.Sweep()
	if opt.Profile == "" {
		opt.Profile, opt.Series, opt.Card, opt.Task = "native-amd64", "demo", "hello", "1"
	}
	in := &Instance{}
	if opt.Share != nil {
		in.Dirs = opt.Share.Dirs
	} else {
		rt, err := os.MkdirTemp("/tmp", "se")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(rt, 0o700)
		t.Cleanup(func() { os.RemoveAll(rt) })
		base := t.TempDir()
		in.Dirs = xdg.Dirs{Runtime: rt, State: filepath.Join(base, "state"), Config: filepath.Join(base, "config"), Home: filepath.Join(base, "home"), UID: os.Getuid()}
		for _, d := range []string{in.Dirs.State, in.Dirs.Config, in.Dirs.Home, filepath.Join(base, "ws")} {
			os.MkdirAll(d, 0o700)
		}
	}
	in.Layout = sockets.Layout{Runtime: in.Dirs.Runtime}
	wsRoot := filepath.Join(filepath.Dir(in.Dirs.State), "ws")
	src := filepath.Join(RepoRoot(), "examples", "workspace", opt.Series, opt.Card)
	dst := filepath.Join(wsRoot, opt.Series, opt.Card)
	if _, err := os.Stat(dst); err != nil {
		if err := copyTree(src, dst); err != nil {
			t.Fatalf("copy example card: %v", err)
		}
	}
	ws, err := workspace.Open(wsRoot)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.Resolve(opt.Profile, opt.Series, opt.Card, opt.Task, "")
	if err != nil {
		t.Fatal(err)
	}
	in.Resolved = r
	in.Name = fmt.Sprintf("%s-%s-%s-t%s", r.Profile.Name, r.Series, r.Card, r.TaskID)
	if r.Profile.MultiTarget() && r.Target.Suffix != "" {
		in.Name += "-" + r.Target.Suffix
	}
	in.Env = []string{
		"XDG_RUNTIME_DIR=" + in.Dirs.Runtime, "STEM_STATE_DIR=" + in.Dirs.State, "STEM_CONFIG_DIR=" + in.Dirs.Config,
		"HOME=" + in.Dirs.Home, "STEM_WORKSPACE=" + wsRoot, "PATH=" + os.Getenv("PATH"),
	}
	if cc := os.Getenv("CONTAINERS_CONF"); cc != "" {
		in.Env = append(in.Env, "CONTAINERS_CONF="+cc)
	}
	in.startContainer(t)
	in.startServers(t)
	return in
}

func (in *Instance) startContainer(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in.Container = "stem-fx-" + randHex(4)
	r := in.Resolved
	lbl := map[string]string{labels.Managed: "true", labels.Instance: in.Name, labels.Profile: r.Profile.Name, labels.Series: r.Series,
		labels.Card: r.Card, labels.Task: r.TaskID, labels.Target: r.Target.Name, labels.Schema: labels.SchemaVersion, labels.Workspace: r.Workspace}
	argv := []string{"run", "-d", "--name", in.Container, "--network", "none", "--label", leftover.Label + "=" + leftover.Owner()}
	for k, v := range lbl {
		argv = append(argv, "--label", k+"="+v)
	}
	argv = append(argv, BaseImage, "sleep", "infinity")
	out, err := podman(ctx, argv...)
	if err != nil {
		// A failed start can leave the container created: remove it.
		in.RemoveContainer()
		t.Fatalf("start fixture container (base image built? `make images`; on hosts that need it, CONTAINERS_CONF from .cache/podman.env, which make sets): %v", err)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { in.RemoveContainer() })
	dir, err := in.Layout.ForContainer(sockets.ThreadKey(r.Workspace), sockets.InstanceKey(in.Name), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Layout.Create(dir); err != nil {
		t.Fatal(err)
	}
	in.Dir = dir
	if err := sockets.WriteJSON(dir.Path, sockets.ContainerJSON, sockets.ContainerInfo{ID: id, Name: in.Container, Instance: in.Name, Profile: r.Profile.Name, Labels: lbl, SocketDir: dir.Path}); err != nil {
		t.Fatal(err)
	}
	in.Record = registry.Record{Instance: in.Name, Profile: r.Profile.Name, Series: r.Series, Card: r.Card, Task: r.TaskID, Target: r.Target.Name,
		ContainerID: id, Image: BaseImage, Schema: 1, SocketDir: dir.Path, ThreadKey: sockets.ThreadKey(r.Workspace),
		InstanceKey: sockets.InstanceKey(in.Name), CardPath: r.CardPath, Workspace: r.Workspace, Labels: lbl, Policy: &r.Policy}
	reg, err := registry.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(ctx, in.Record); err != nil {
		t.Fatal(err)
	}
	// The editable globs `stemctl up` records on the host (the policy
	// floor is left unset: tests set it when they need one).
	in.SetEditableFloor(t, r.Editable)
}

// RemoveContainer removes the fixture's container (tests of a container
// removed behind stem's back call it directly).
func (in *Instance) RemoveContainer() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	podman(ctx, "rm", "-f", "-t", "0", in.Container)
}

func (in *Instance) startServers(t testing.TB) {
	t.Helper()
	prompt := filepath.Join(RepoRoot(), "containers", "files", "shell", "stem-prompt.sh")
	sysinit := filepath.Join(RepoRoot(), "containers", "files", "nvim", "sysinit.vim")
	rc := filepath.Join(in.Dirs.Home, ".stem-bashrc")
	os.WriteFile(rc, []byte("PS1='student$ '\nHISTFILE="+filepath.Join(in.Dirs.Home, ".bash_history")+"\n[ -r "+shellQuote(prompt)+" ] && . "+shellQuote(prompt)+"\n"), 0o600)
	// The editor plugin is on the runtimepath as the images install it
	// (its startup stays off without $STEM_SOCKDIR; proposals use it).
	plugin := filepath.Join(RepoRoot(), "containers", "files", "nvim")
	rtp := "set rtp^=" + strings.NewReplacer(",", `\,`, " ", `\ `).Replace(plugin)
	in.nvimCmd = "exec nvim --clean --cmd " + shellQuote(rtp) + " -u " + shellQuote(sysinit) + " --listen " + shellQuote(in.Dir.Nvim())
	in.bashCmd = "exec bash --noprofile --rcfile " + shellQuote(rc) + " -i"
	// The mark lets a later run remove servers a timed-out one left.
	in.shellEnv = append(os.Environ(), "HOME="+in.Dirs.Home, "TMUX=", leftover.Env())
	// A stale socket from servers killed earlier would make nvim refuse to
	// listen (stem-init removes them the same way).
	for _, s := range []string{in.Dir.Tmux(), in.Dir.Nvim()} {
		if fi, err := os.Lstat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(s)
		}
	}
	in.tmuxSetup(t, "new-session", "-d", "-s", "stem", "-n", "edit", "-x", "160", "-y", "48", "-c", in.Resolved.TaskDir, in.nvimCmd)
	in.tmuxSetup(t, "set-option", "-g", "remain-on-exit", "off")
	// Every interactive bash in the container sources stem's prompt
	// integration (/etc/bash.bashrc); new windows here get the same shell.
	in.tmuxSetup(t, "set-option", "-g", "default-command", in.bashCmd)
	in.tmuxSetup(t, "new-window", "-d", "-t", "stem:", "-n", "shell", "-c", in.Resolved.TaskDir, in.bashCmd)
	t.Cleanup(func() { in.KillTmux() })
	in.WaitReady(t)
}

// tmuxSetup runs a tmux command with the environment the servers start in.
func (in *Instance) tmuxSetup(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", in.Dir.Tmux(), "-f", "/dev/null"}, args...)...)
	cmd.Env = in.shellEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
}

// RestartTmux kills the tmux server (and nvim with it) and starts both
// again on the same sockets, as a restarted container's stem-init would.
func (in *Instance) RestartTmux(t testing.TB) {
	t.Helper()
	in.KillTmux()
	deadline := time.Now().Add(10 * time.Second)
	for probe.Nvim(context.Background(), in.Dir.Nvim()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("nvim still answers 10s after its tmux server was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.startServers(t)
}

// KillNvim kills the student's Neovim (SIGKILL, so its socket file stays
// behind) and waits until it no longer answers. Its window closes.
func (in *Instance) KillNvim(t testing.TB) {
	t.Helper()
	pid := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:edit", "#{pane_pid}"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "kill", "-KILL", pid).CombinedOutput(); err != nil {
		t.Fatalf("kill nvim (pid %s): %v\n%s", pid, err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for probe.Nvim(context.Background(), in.Dir.Nvim()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("nvim still answers 10s after SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And until tmux has closed its window: a window still there (tmux not
	// yet told of the death) would be the "edit" a later StartNvim's new
	// window shares its name with, and the next KillNvim would kill the
	// dead pid again.
	for strings.Contains(" "+strings.Join(strings.Fields(in.Tmux(t, "list-panes", "-a", "-F", "#{pane_pid}")), " ")+" ", " "+pid+" ") {
		if time.Now().After(deadline) {
			t.Fatalf("tmux still shows the pane of the killed nvim (pid %s) 10s after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartNvim starts Neovim again in a new "edit" window on the same socket
// (the student typing nvim again) and waits until it answers.
func (in *Instance) StartNvim(t testing.TB) {
	t.Helper()
	if fi, err := os.Lstat(in.Dir.Nvim()); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(in.Dir.Nvim())
	}
	in.tmuxSetup(t, "new-window", "-d", "-t", "stem:", "-n", "edit", "-c", in.Resolved.TaskDir, in.nvimCmd)
	in.WaitReady(t)
}

// Recreate replaces the container the way `stemctl up` re-creates one: the
// old container is removed, a new one with the same labels gets a new id,
// a new socket directory and a new registry record, and the servers start
// in the new directory. Unless keepOld is set the old servers are stopped
// and the old directory removed; with keepOld they go on answering there
// (a stale directory someone kept around).
func (in *Instance) Recreate(t testing.TB, keepOld bool) (old sockets.Dir) {
	t.Helper()
	old = in.Dir
	in.RemoveContainer()
	if keepOld {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			exec.CommandContext(ctx, "tmux", "-S", old.Tmux(), "kill-server").Run()
		})
	} else {
		in.KillTmux()
		os.RemoveAll(old.Path)
	}
	in.startContainer(t)
	in.startServers(t)
	return old
}

// WaitReady waits until both servers answer.
func (in *Instance) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		e1 := probe.Tmux(ctx, in.Dir.Tmux())
		e2 := probe.Nvim(ctx, in.Dir.Nvim())
		cancel()
		if e1 == nil && e2 == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fixture servers not ready: tmux: %v; nvim: %v", e1, e2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KillTmux stops the tmux server (and with it nvim).
func (in *Instance) KillTmux() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exec.CommandContext(ctx, "tmux", "-S", in.Dir.Tmux(), "kill-server").Run()
}

// Tmux runs a one-shot tmux command against the fixture's server.
func (in *Instance) Tmux(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tmux", append([]string{"-S", in.Dir.Tmux()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Select points the account's MCP selection at this instance.
func (in *Instance) Select(t testing.TB) {
	t.Helper()
	l := in.Layout
	os.MkdirAll(filepath.Join(l.Root(), sockets.SelectedDir), 0o700)
	tmp := filepath.Join(l.Root(), sockets.SelectedDir, ".tmp-"+randHex(4))
	if err := os.Symlink(in.Dir.Path, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, l.Selected()); err != nil {
		t.Fatal(err)
	}
}

func podman(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("podman %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		return os.WriteFile(target, data, fi.Mode().Perm())
	})
}
