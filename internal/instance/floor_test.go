package instance_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/engine/podman"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/workspace"
)

// TestFloorHoldsAgainstTheContainer: the card's stem.toml is loosened from
// inside the container, which then exits (stem-init gets SIGTERM); the
// student's next `up` starts it again, `down` + `up` starts it again,
// a changed configuration re-creates it, and a restarted Podman service
// serves the next start. Every time the recorded policy stays the one
// the instance was made with, and a real stem-mcp at full still has no
// nvim_command; a canary on the host shows what that Ex command would
// have done. The control is the student loosening it on the host.
func TestFloorHoldsAgainstTheContainer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	mcpBin := os.Getenv("STEM_MCP_BIN")
	if mcpBin == "" {
		t.Fatal("STEM_MCP_BIN is not set: build stem-mcp (make build) and point it there (make test does)")
	}
	r := w.resolve("native-amd64", "demo", "hello", "1", "")
	toml := filepath.Join(r.CardPath, workspace.ManifestName)
	orig, err := os.ReadFile(toml)
	if err != nil {
		t.Fatal(err)
	}
	tightToml := string(orig) + "\n[defaults.agents]\n" + tightAgents + "\n"
	if err := os.WriteFile(toml, []byte(tightToml), 0o644); err != nil {
		t.Fatal(err)
	}
	r = w.resolve("native-amd64", "demo", "hello", "1", "")
	rec := w.up(r).Record
	if !tight(*rec.Policy) {
		t.Fatalf("first record %+v", *rec.Policy)
	}
	canary := filepath.Join(r.TaskDir, "canary-ex")
	// stem-mcp sees this account's state, runtime and Podman.
	env := append(os.Environ(), "STEM_STATE_DIR="+filepath.Dir(w.m.Registry.Path()), "XDG_RUNTIME_DIR="+w.m.Layout.Runtime)
	exCall := func() (string, error) {
		cmd := exec.Command(mcpBin, "call", "--level", "full", "--instance", rec.Instance,
			"--args", `{"command":"call writefile(['pwned'], '`+canary+`')"}`, "nvim_command")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	stillTight := func(how string) {
		t.Helper()
		got, err := w.m.Registry.Get(ctx, rec.Instance)
		if err != nil {
			t.Fatal(err)
		}
		if got.Policy == nil || !tight(*got.Policy) {
			t.Fatalf("%s: recorded %+v", how, got.Policy)
		}
		if out, err := exCall(); err == nil || !strings.Contains(out, "tool 'nvim_command' not found") { // the policy removed it
			t.Fatalf("%s: a full nvim_command: %v\n%s", how, err, out)
		}
		if _, err := os.Stat(canary); !os.IsNotExist(err) {
			t.Fatalf("%s: the canary exists (%v)", how, err)
		}
	}
	inside := func(script string) {
		t.Helper()
		if code, err := w.m.Exec(ctx, rec.Instance, engine.ExecSpec{Cmd: []string{"sh", "-c", script}}); err != nil || code != 0 {
			t.Fatalf("in the container: %s: %d %v", script, code, err)
		}
	}
	loosenInside := func() {
		t.Helper()
		inside("sed -i '/^\\[defaults.agents\\]/,$d' " + toml)
		if b, _ := os.ReadFile(toml); string(b) != string(orig)+"\n" && string(b) != string(orig) {
			t.Fatalf("stem.toml after the container's edit:\n%s", b)
		}
	}
	waitStopped := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			c, err := w.m.Engine.Inspect(ctx, rec.ContainerID)
			if err == nil && !c.Running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the container did not exit: %+v %v", c, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	upAgain := func(how string, want instance.Action) {
		t.Helper()
		// The student's next command reads the card again.
		res := w.up(w.resolve("native-amd64", "demo", "hello", "1", ""))
		if res.Action != want {
			t.Fatalf("%s: up %s (%s), want %s", how, res.Action, res.Reason, want)
		}
		rec = res.Record
		stillTight(how)
	}

	// The container exits: stem-init is sent SIGTERM from inside.
	loosenInside()
	inside("kill -TERM 1")
	waitStopped()
	upAgain("up after the container exited", instance.Started)

	// down + up.
	if _, err := w.m.Down(ctx, rec.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	upAgain("down + up", instance.Started)

	// A changed configuration re-creates the container.
	if err := os.WriteFile(w.bin, []byte("#!/bin/sh\nexit 0 # changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	upAgain("re-create", instance.Recreated)

	// The Podman service restarts between the exit and the next start.
	dir, err := os.MkdirTemp("/tmp", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Runs after the services are killed and before the world's clean-up,
	// which would otherwise start a private service again (the engine
	// starts one when none answers) and leave it running.
	shared := w.m.Engine
	t.Cleanup(func() { w.m.Engine = shared })
	service := func() *podman.Engine {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		e, err := podman.Connect(cctx, podman.Options{URI: "unix://" + filepath.Join(dir, "p.sock"), StartService: true, LogDir: dir})
		if err != nil {
			t.Fatalf("start a private Podman service: %v", err)
		}
		if s := e.Service(); s != nil {
			// SIGKILL: a service asked to stop waits for the connections
			// still open to it, and outlived the test.
			t.Cleanup(func() { syscall.Kill(s.PID, syscall.SIGKILL) })
		}
		return e
	}
	first := service()
	w.m.Engine = first
	inside("kill -TERM 1")
	waitStopped()
	if s := first.Service(); s != nil {
		syscall.Kill(s.PID, syscall.SIGTERM)
		for syscall.Kill(s.PID, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	w.m.Engine = service()
	upAgain("up after a Podman service restart", instance.Started)

	// Control: loosened by the student on the host, the same call runs.
	st, err := w.m.Consents()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetFloor(ctx, rec.Instance, agentpolicy.Default(), "test"); err != nil {
		t.Fatal(err)
	}
	w.m.Down(ctx, rec.Instance, time.Second)
	res := w.up(w.resolve("native-amd64", "demo", "hello", "1", ""))
	if res.Record.Policy == nil || !res.Record.Policy.IsDefault() {
		t.Fatalf("control: after loosening on the host the record is %+v", res.Record.Policy)
	}
	for i := 0; ; i++ {
		out, err := exCall()
		if err == nil {
			break
		}
		if i == 20 || !strings.Contains(out, "waiting for the student's input") {
			t.Fatalf("control: nvim_command after loosening: %v\n%s", err, out)
		}
		// The editor came back from the stop with a message waiting for
		// Enter: the student answers it.
		mcp(t, mcpBin, env, rec.Instance, "pane_send_keys", `{"pane":"`+editorPane(t, mcpBin, env, rec.Instance)+`","keys":"{Enter}"}`)
	}
	waitUntilFile(t, canary, "pwned\n")
}

// mcp calls tool through a real stem-mcp session at full.
func mcp(t *testing.T, bin string, env []string, inst, tool, args string) string {
	t.Helper()
	cmd := exec.Command(bin, "call", "--level", "full", "--instance", inst, "--args", args, tool)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, out)
	}
	return string(out)
}

func editorPane(t *testing.T, bin string, env []string, inst string) string {
	t.Helper()
	var l struct {
		Panes []struct {
			ID     string `json:"id"`
			Window string `json:"window_name"`
		} `json:"panes"`
	}
	if err := json.Unmarshal([]byte(mcp(t, bin, env, inst, "pane_list", "{}")), &l); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Panes {
		if p.Window == "edit" {
			return p.ID
		}
	}
	t.Fatalf("no editor pane in %+v", l)
	return ""
}

func waitUntilFile(t *testing.T, p, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(p); err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q", p, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
