package instance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/neovim/go-client/nvim"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/lib/unixpin"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/verify"
)

// tmuxIn runs tmux against an instance's server from the host.
func tmuxIn(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A student who quits nvim keeps their session: up starts nvim again in a
// new window instead of re-creating the container.
func TestUpRestartsOnlyNvim(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	dir := rec.Dir()
	// The log tail that failed starts quote: stem-init's readiness line.
	// up returns once the sockets answer; the line reaches the container's
	// log through conmon a moment later, so wait for it.
	var tail string
	var terr error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tail, terr = w.m.Engine.LogTail(ctx, rec.ContainerID, 5)
		if terr == nil && strings.Contains(tail, "stem-init: ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log tail: %q %v", tail, terr)
		}
	}
	// Student state that a re-creation would lose.
	tmuxIn(t, dir.Tmux(), "new-window", "-d", "-n", "student-work", "sleep 600")

	if code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"pkill", "-x", "nvim"}}); err != nil || code != 0 {
		t.Fatalf("kill nvim: %d %v", code, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for probe.Nvim(ctx, dir.Nvim()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("nvim still answers after pkill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, _ := w.m.Status(ctx, rec.Instance)
	if st.State != "unhealthy" || st.Nvim || !st.Tmux || !strings.Contains(st.Hint, "stemctl up native-amd64 demo hello 1") {
		t.Fatalf("status with nvim gone: %+v", st)
	}

	res := w.up(r)
	if res.Action != instance.Repaired || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up with nvim gone: %+v", res)
	}
	if err := probe.Nvim(ctx, dir.Nvim()); err != nil {
		t.Fatalf("nvim after repair: %v", err)
	}
	windows := tmuxIn(t, dir.Tmux(), "list-windows", "-F", "#{window_name}")
	if !strings.Contains(windows, "student-work") {
		t.Fatalf("the student's window is gone: %q", windows)
	}
	if n := strings.Count("\n"+windows+"\n", "\nedit\n"); n != 1 {
		t.Fatalf("want one edit window: %q", windows)
	}
	if again := w.up(r); again.Action != instance.Reused {
		t.Fatalf("up after repair: %+v", again)
	}
}

// A runtime directory that stopped being private is refused before anything
// happens to a healthy instance.
func TestUpKeepsInstanceWhenRuntimeDirIsBad(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	for _, dir := range []string{w.m.Layout.Runtime, w.m.Layout.Root(), filepath.Dir(rec.SocketDir)} {
		os.Chmod(dir, 0o755)
		uctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err := w.m.Up(uctx, r, instance.UpOptions{})
		cancel()
		os.Chmod(dir, 0o700)
		if err == nil || !strings.Contains(err.Error(), "0700") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("up with %s at 0755: %v", dir, err)
		}
		c, err := w.m.Engine.Inspect(ctx, rec.ContainerID)
		if err != nil || !c.Running {
			t.Fatalf("the instance did not survive a refused up (%s): %v", dir, err)
		}
	}
	if res := w.up(r); res.Action != instance.Reused || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up once fixed: %+v", res)
	}
}

// Something in the container replaces t.sock with a symlink to another
// server: up, status and verification refuse it and keep the container.
func TestPlantedSocketSymlinkRefused(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	dir := rec.Dir()
	// Another live tmux server the link points at: following it would work.
	other := filepath.Join(t.TempDir(), "o.sock")
	if out, err := exec.Command("tmux", "-S", other, "-f", "/dev/null", "new-session", "-d").CombinedOutput(); err != nil {
		t.Fatalf("decoy tmux: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", other, "kill-server").Run() })
	// The planted link, made from inside the container as the student could.
	real := dir.Tmux() + ".real"
	if code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c", `mv "$1" "$2" && ln -s "$3" "$1"`, "sh", dir.Tmux(), real, other}}); err != nil || code != 0 {
		t.Fatalf("plant link: %d %v", code, err)
	}
	// A client that follows the link reaches the decoy (else the test
	// proves nothing); stem's own probe does not follow it.
	if out, err := exec.Command("tmux", "-S", dir.Tmux(), "list-sessions").CombinedOutput(); err != nil {
		t.Fatalf("the link does not lead to a live server, so the test proves nothing: %v %s", err, out)
	}
	if err := probe.Tmux(ctx, dir.Tmux()); !errors.Is(err, unixpin.ErrSymlink) {
		t.Fatalf("probe through the planted link: %v, want unixpin.ErrSymlink", err)
	}

	_, err := w.checker().Record(ctx, rec)
	var verr *verify.Error
	if !errors.As(err, &verr) || verr.Check != "socket-dir" || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("verify with a planted t.sock: %v", err)
	}
	_, err = w.m.Up(ctx, r, instance.UpOptions{})
	var notOurs *sockets.NotOursError
	if !errors.As(err, &notOurs) || !strings.Contains(err.Error(), "stemctl rm") {
		t.Fatalf("up with a planted t.sock: %v", err)
	}
	st, err := w.m.Status(ctx, rec.Instance)
	if err != nil || st.State != "unhealthy" || st.Tmux || !strings.Contains(strings.Join(st.Problems, "\n"), "symlink") {
		t.Fatalf("status with a planted t.sock: %v %+v", err, st)
	}
	// debug runs the card's commands (which the container can also edit)
	// in the tmux it reaches: it must not reach the decoy.
	decoyPanes := func() string {
		out, _ := exec.Command("tmux", "-S", other, "list-panes", "-a", "-F", "#{pane_id}").Output()
		return string(out)
	}
	before := decoyPanes()
	if _, err := w.m.Debug(ctx, rec, r); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("debug with a planted t.sock: %v", err)
	}
	if tc, err := instance.DialTmux(ctx, rec); !errors.Is(err, unixpin.ErrSymlink) {
		if tc != nil {
			tc.Close()
		}
		t.Fatalf("DialTmux through the planted link: %v, want unixpin.ErrSymlink", err)
	}
	if after := decoyPanes(); after != before {
		t.Fatalf("the decoy server changed: panes %q, then %q", before, after)
	}
	if c, err := w.m.Engine.Inspect(ctx, rec.ContainerID); err != nil || !c.Running {
		t.Fatalf("the container did not survive: %v", err)
	}
	// Put it back: the instance is usable again.
	os.Remove(dir.Tmux())
	if err := os.Rename(real, dir.Tmux()); err != nil {
		t.Fatal(err)
	}
	if res := w.up(r); res.Action != instance.Reused {
		t.Fatalf("up after restoring: %+v", res)
	}
}

// An instance whose container carries an older schema label is re-created.
func TestUpRecreatesOnSchemaChange(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	img, err := w.m.Engine.ImageInspect(ctx, r.Profile.Image)
	if err != nil {
		t.Fatal(err)
	}
	idm, err := w.m.IDMap()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := instance.NewPlan(r, instance.PlanOptions{Layout: w.m.Layout, ImageID: img.ID, MCPBinary: w.bin, IDMap: &idm})
	if err != nil {
		t.Fatal(err)
	}
	if plan.ConfigHash != rec.ConfigHash {
		t.Fatal("the plan does not match the running instance")
	}
	// Replace the container with one identical but for an old schema label
	// (stopped: it never needs to run).
	if err := w.m.Engine.Remove(ctx, rec.ContainerID, true); err != nil {
		t.Fatal(err)
	}
	spec := plan.Spec
	spec.Labels = map[string]string{}
	for k, v := range plan.Spec.Labels {
		spec.Labels[k] = v
	}
	spec.Labels[labels.Schema] = "0"
	spec.Labels[labels.ConfigHash] = plan.ConfigHash
	old, err := w.m.Engine.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	res := w.up(r)
	if res.Action != instance.Recreated || !strings.Contains(res.Reason, "schema") || res.Record.ContainerID == old {
		t.Fatalf("up over an old schema: %+v", res)
	}
	if _, err := w.m.Engine.Inspect(ctx, old); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the old-schema container survived: %v", err)
	}
	if res.Record.Schema != labels.SchemaNumber() {
		t.Fatalf("record schema %d", res.Record.Schema)
	}
}

// Devices given once stay with the instance: a later up (or build, debug...)
// without --device reuses the container rather than re-creating it without
// the board, and a re-creation keeps them.
func TestUpKeepsRecordedDevices(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("rp2350", "demo", "hello", "3", "")
	uctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// A node with the CDC ACM major stands in for a plugged-in board.
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a device node under /dev and needs root (CI runs as root)")
	}
	dev := fmt.Sprintf("/dev/stemtest-acm-r%d", os.Getpid())
	if out, err := exec.Command("mknod", "-m", "0600", dev, "c", "166", "251").CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v %s", err, out)
	}
	t.Cleanup(func() { os.Remove(dev) })
	first, err := w.m.Up(uctx, r, instance.UpOptions{Devices: []string{dev}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.up(r)
	if res.Action != instance.Reused || strings.Join(res.Record.Devices, ",") != dev {
		t.Fatalf("up without --device: %+v", res)
	}
	// A configuration change re-creates it with the device.
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755)
	re := w.up(r)
	if re.Action != instance.Recreated || re.Record.ContainerID == first.Record.ContainerID || strings.Join(re.Record.Devices, ",") != dev {
		t.Fatalf("re-create without --device: %+v", re)
	}
	var out strings.Builder
	if code, err := w.m.Exec(ctx, re.Record.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c", "echo $STEM_DEVICE"}, Stdout: &out}); err != nil || code != 0 || strings.TrimSpace(out.String()) != dev {
		t.Fatalf("STEM_DEVICE in the re-created container: %q %d %v", out.String(), code, err)
	}
}

// Without stem-mcp only bringing an instance up fails, with the finder's
// message; nothing is created.
func TestUpWithoutMCPBinary(t *testing.T) {
	w := newWorld(t)
	m := *w.m
	m.MCPBinary, m.MCPBinaryErr = "", errors.New("stem-mcp not found next to stemctl or in PATH")
	_, err := m.Up(context.Background(), w.resolve("native-amd64", "demo", "hello", "1", ""), instance.UpOptions{})
	if err == nil || !strings.Contains(err.Error(), "stem-mcp not found") {
		t.Fatalf("up without stem-mcp: %v", err)
	}
	if recs, _ := m.Registry.List(context.Background()); len(recs) != 0 {
		t.Fatal("a record was written")
	}
	if _, err := m.List(context.Background()); err != nil {
		t.Fatalf("list without stem-mcp: %v", err)
	}
}

// A host tmux of another protocol version cannot probe the container's
// server; up asks the container's tmux instead of re-creating the instance.
func TestUpProbesTmuxInsideOnVersionMismatch(t *testing.T) {
	w := newWorld(t)
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	m := *w.m
	m.Servers.Tmux = func(ctx context.Context, sock string) error {
		return fmt.Errorf("%w: protocol version mismatch (client 8, server 9)", probe.ErrTmuxVersion)
	}
	w.m = &m
	res := w.up(r)
	if res.Action != instance.Reused || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up with a mismatched host tmux: %+v", res)
	}
	// status and list ask the same check, so they agree with up.
	ctx := context.Background()
	if st, err := m.Status(ctx, rec.Instance); err != nil || st.State != "running" || !st.Tmux {
		t.Fatalf("status with a mismatched host tmux: %+v %v", st, err)
	}
	if all, err := m.List(ctx); err != nil || len(all) != 1 || all[0].State != "running" {
		t.Fatalf("list with a mismatched host tmux: %+v %v", all, err)
	}
	// Control: without the fallback the same server reads as dead.
	noFallback := m
	noFallback.Servers.TmuxInside = nil
	if st, _ := noFallback.Status(ctx, rec.Instance); st.State != "unhealthy" {
		t.Fatalf("status without the fallback: %+v (else this test proves nothing)", st)
	}
	// No tmux on the host at all (the real probe, an empty PATH): the same.
	mismatch := m.Servers.Tmux
	m.Servers.Tmux = probe.Tmux
	path := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	res = w.up(r)
	os.Setenv("PATH", path)
	m.Servers.Tmux = mismatch
	if res.Action != instance.Reused || res.Record.ContainerID != rec.ContainerID {
		t.Fatalf("up without a host tmux: %+v", res)
	}
	// And it still notices a dead server through the container's tmux.
	tmuxIn(t, rec.Dir().Tmux(), "kill-server")
	res = w.up(r)
	if res.Action != instance.Recreated || !strings.Contains(res.Reason, "inside the container") {
		t.Fatalf("up with tmux dead and a mismatched host tmux: %+v", res)
	}
}

// A container stem made whose record is gone is listed as an orphan, with
// what removes it; another workspace's containers are not.
func TestListShowsOrphans(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.m.Workspace = w.ws.Root
	rec := w.up(w.resolve("native-amd64", "demo", "hello", "1", "")).Record
	if err := w.m.Registry.Delete(ctx, rec.Instance); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.m.Engine.Remove(context.Background(), rec.ContainerID, true) })
	sts, err := w.m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || sts[0].State != "orphan" || sts[0].Record.ContainerID != rec.ContainerID || sts[0].Record.Instance != rec.Instance ||
		!strings.Contains(sts[0].Hint, "podman rm -f "+rec.ContainerID[:12]) {
		t.Fatalf("list with a lost record: %+v", sts)
	}
	other := *w.m
	other.Workspace = "/nonexistent/other-workspace"
	if sts, _ := other.List(ctx); len(sts) != 0 {
		t.Fatalf("another workspace's container listed: %+v", sts)
	}
}

// Re-creating the selected instance moves the selection to the new
// container; another instance's selection is left alone.
func TestSelectionFollowsRecreatedInstance(t *testing.T) {
	w := newWorld(t)
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	if err := selection.Select(w.m.Layout, rec.Dir()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755)
	re := w.up(r)
	if re.Action != instance.Recreated {
		t.Fatalf("%+v", re)
	}
	if cur, err := selection.Current(w.m.Layout); err != nil || cur != re.Record.SocketDir {
		t.Fatalf("selection %q %v, want %s", cur, err, re.Record.SocketDir)
	}
	if _, err := w.checker().Selected(context.Background()); err != nil {
		t.Fatalf("the followed selection does not verify: %v", err)
	}
	// Selected elsewhere: a re-creation of this instance does not steal it.
	other := w.up(w.resolve("hazard3-sim", "inf", "bss", "4", "")).Record
	if err := selection.Select(w.m.Layout, other.Dir()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt again\n"), 0o755)
	w.up(r)
	if cur, _ := selection.Current(w.m.Layout); cur != other.SocketDir {
		t.Fatalf("selection moved to %s", cur)
	}
}

// Several stemctl processes bringing the same instance up at once: one
// creates it, the others wait and reuse it; nobody fails or re-creates.
func TestConcurrentUpsOfOneInstance(t *testing.T) {
	w := newWorld(t)
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	const n = 4
	type out struct {
		res instance.UpResult
		err error
	}
	ch := make(chan out, n)
	for i := 0; i < n; i++ {
		go func() {
			// A Manager of its own, as a separate process would have.
			m := *w.m
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := m.Up(ctx, r, instance.UpOptions{})
			ch <- out{res, err}
		}()
	}
	created, ids := 0, map[string]bool{}
	for i := 0; i < n; i++ {
		o := <-ch
		if o.err != nil {
			t.Fatalf("concurrent up: %v", o.err)
		}
		if o.res.Action == instance.Created {
			created++
		} else if o.res.Action != instance.Reused {
			t.Errorf("concurrent up: %s (%s)", o.res.Action, o.res.Reason)
		}
		ids[o.res.Record.ContainerID] = true
	}
	if created != 1 || len(ids) != 1 {
		t.Fatalf("%d created, %d container ids", created, len(ids))
	}
}

// Verification (mcp select and status, agent start) falls back to the
// container's tmux like up does.
func TestVerifyAsksContainerTmuxOnMismatch(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rec := w.up(w.resolve("native-amd64", "demo", "hello", "1", "")).Record
	c := w.checker()
	c.Servers.Tmux = func(ctx context.Context, sock string) error {
		return fmt.Errorf("%w: protocol version mismatch", probe.ErrTmuxVersion)
	}
	if _, err := c.Record(ctx, rec); err == nil {
		t.Fatal("without a fallback a mismatched host tmux must fail the check (else this test proves nothing)")
	}
	c.Servers.TmuxInside = instance.TmuxInside(w.m.Engine)
	if _, err := c.Record(ctx, rec); err != nil {
		t.Fatalf("verify through the container's tmux: %v", err)
	}
	tmuxIn(t, rec.Dir().Tmux(), "kill-server")
	var verr *verify.Error
	if _, err := c.Record(ctx, rec); !errors.As(err, &verr) || verr.Check != "tmux" {
		t.Fatalf("a dead server through the container's tmux: %v", err)
	}
}

// Re-creating a running instance ends the student's session: commands that
// only use the instance never do it, and up refuses over unsaved editor
// buffers unless forced.
func TestRecreateGuardsTheSession(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	w.m.NvimModified = probe.NvimModified
	// The student edits a file and does not save it.
	v, err := nvim.Dial(rec.Dir().Nvim())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(r.TaskDir, "hello.c")
	if err := v.Command("edit " + file); err != nil {
		t.Fatal(err)
	}
	if err := v.SetBufferLines(0, 0, 0, true, [][]byte{[]byte("/* unsaved */")}); err != nil {
		t.Fatal(err)
	}
	v.Close()
	os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # rebuilt\n"), 0o755) // the config changes

	same := func(what string) {
		t.Helper()
		if c, err := w.m.Engine.Inspect(ctx, rec.ContainerID); err != nil || !c.Running {
			t.Fatalf("%s: the running container did not survive: %v", what, err)
		}
	}
	if _, err := w.m.Up(ctx, r, instance.UpOptions{KeepRunning: true}); err == nil || !strings.Contains(err.Error(), "run `stemctl up native-amd64 demo hello 1") {
		t.Fatalf("up from build/debug/agent start over a changed config: %v", err)
	}
	same("KeepRunning")
	if _, err := w.m.Up(ctx, r, instance.UpOptions{}); err == nil || !strings.Contains(err.Error(), "unsaved changes in "+file) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("up over unsaved work: %v", err)
	}
	same("unsaved buffer")
	if res, err := w.m.Up(ctx, r, instance.UpOptions{Force: true}); err != nil || res.Action != instance.Recreated || res.Record.ContainerID == rec.ContainerID {
		t.Fatalf("up --force: %+v %v", res, err)
	}
}
