package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/mcpserver"
)

// The design's headline example, `stemctl agent start codex hazard3-sim inf
// bss 4`, with the test provider in Codex's place (at the default level),
// and the same task on rp2350 with --target rp2350-rv and no device (agent
// start needs none; deploy does): each creates its instance and hands the
// agent the profile's context (RV32 commands, gdb-multiarch, QEMU or
// OpenOCD's gdb server) and a working MCP session. Then `agent stop --all`
// stops both agents, on their two instances, closes their windows and
// leaves both sessions running.
func TestAgentStartHazard3AndRP2350ThenStopAll(t *testing.T) {
	a := newAccount(t)
	type want struct {
		args     []string
		instance string
		context  []string
		target   string
		debug    string
	}
	var recs []agentstore.Record
	var sts []instanceInfo
	for _, w := range []want{{
		args:     []string{"hazard3-sim", "inf", "bss", "4"},
		instance: "hazard3-sim-inf-bss-t4",
		context: []string{"inf/bss task 4", "## Profile hazard3-sim", "- target: rv32 (RV32IM on QEMU's virt machine)",
			"- toolchain: riscv64-unknown-elf-gcc", "- debugger: gdb-multiarch", "- simulator: qemu-system-riscv32", `build: "make"`,
			`debug: "gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf"`,
			`debug_program: "make && qemu-system-riscv32 -M virt -cpu rv32 -nographic -bios none -S -gdb tcp:127.0.0.1:1234 -kernel main.elf"`,
			"network none", "level **assist**"},
		target: "rv32",
		debug:  "gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf",
	}, {
		args:     []string{"rp2350", "inf", "bss", "4", "--target", "rp2350-rv"},
		instance: "rp2350-inf-bss-t4-rv",
		context: []string{"inf/bss task 4", "## Profile rp2350", "- target: rp2350-rv (the RP2350's Hazard3 cores)", "openocd",
			"- debugger: gdb-multiarch", `build: "make TARGET=rp2350-rv"`, `test: "make test TARGET=rp2350-rv"`,
			`debug: "gdb-multiarch -q -ex 'target extended-remote 127.0.0.1:3333' build/rp2350-rv/main.elf"`,
			`debug_program: "make gdbserver TARGET=rp2350-rv"`, `deploy: "make deploy TARGET=rp2350-rv"`,
			"Only the USB device named with --device is passed into the container.", "level **assist**"},
		target: "rp2350-rv",
		debug:  "gdb-multiarch -q -ex 'target extended-remote 127.0.0.1:3333' build/rp2350-rv/main.elf",
	}} {
		var rec agentstore.Record
		a.mustJSON(&rec, append(append([]string{"agent", "start", "helper"}, w.args...), "--background")...)
		st := a.status(w.instance)
		if rec.Instance != w.instance || st.State != "running" || rec.ContainerID != st.Record.ContainerID || rec.Level != "assist" {
			t.Fatalf("agent start helper %v: record %+v, status %+v", w.args, rec, st)
		}
		rep := a.waitReport(rec.ID, 30*time.Second)
		for _, c := range append(w.context, "card repository: `"+st.Record.CardPath+"`", "tmux: `"+filepath.Join(st.Record.SocketDir, "t.sock")+"`") {
			if !strings.Contains(rep.ContextText, c) {
				t.Errorf("%s: the context lacks %q:\n%s", w.instance, c, rep.ContextText)
			}
		}
		if rep.Env["STEM_INSTANCE"] != w.instance || str(rep.SessionStatus["instance"]) != w.instance ||
			str(rep.SessionStatus["container_id"]) != st.Record.ContainerID {
			t.Errorf("%s: env %v, session_status %v", w.instance, rep.Env, rep.SessionStatus)
		}
		if got, ws := sorted(rep.Tools), sorted(mcpserver.ToolNames(mcpserver.Assist)); !slices.Equal(got, ws) {
			t.Errorf("%s: tools %v, want the assist set", w.instance, got)
		}
		cr := rep.ContextResrc
		if str(path(cr, "profile", "name")) != w.args[0] || str(path(cr, "target", "name")) != w.target || str(path(cr, "commands", "debug")) != w.debug {
			t.Errorf("%s: stem://context %v", w.instance, cr)
		}
		a.waitPane(st, rec.Pane, "stem-test-agent "+rec.ID+" ready", 10*time.Second)
		recs, sts = append(recs, rec), append(sts, st)
	}
	if listed := a.agents(); len(listed) != 2 {
		t.Fatalf("agent list: %+v", listed)
	}

	before := []string{a.windows(sts[0]), a.windows(sts[1])}
	out := a.must("agent", "stop", "--all")
	for i, rec := range recs {
		if !strings.Contains(out, "stopped agent "+rec.ID+" (helper on "+rec.Instance+")") {
			t.Fatalf("agent stop --all:\n%s", out)
		}
		waitEnded(t, rec, 5*time.Second)
		st := a.status(rec.Instance)
		if st.State != "running" || !st.Tmux || !st.Nvim || st.Record.ContainerID != sts[i].Record.ContainerID {
			t.Fatalf("%s after stop --all: %+v", rec.Instance, st)
		}
		if after := a.windows(st); after != strings.Replace(before[i], rec.Window+" helper "+rec.Pane+"\n", "", 1) || strings.Contains(after, rec.Window+" ") {
			t.Fatalf("%s: windows before stop --all:\n%s\nafter:\n%s", rec.Instance, before[i], after)
		}
	}
	if listed := a.agents(); len(listed) != 0 || len(a.agentDirs()) != 0 {
		t.Fatalf("after stop --all: %+v %v", listed, a.agentDirs())
	}
	if r, _ := a.run("agent", "stop", "--all"); r.Code == 0 || !strings.Contains(r.Stderr, "no running agent") {
		t.Fatalf("stop --all with nothing to stop: %d %s", r.Code, r.Stderr)
	}
}

// A provider that ignores SIGHUP and SIGTERM (and its children, which
// inherit that): `agent stop` ends it through the supervisor's escalation
// (its sandbox container is stopped, then killed) with no warning, and
// after a supervisor killed outright it removes the sandbox left behind;
// nothing of the agent is left, and the student's session is intact.
func TestAgentStopKillsAProviderThatIgnoresSignals(t *testing.T) {
	a := newAccount(t)
	cfgPath := filepath.Join(a.Base, "config", agentcli.ConfigFile)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, []byte(`
[providers.stubborn]
command = ["/bin/bash", "-c", "trap '' HUP TERM INT; echo stubborn ready; while :; do sleep 1; done"]
`)...)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	a.must("up", "native-amd64", "demo", "hello", "1")
	st := a.status(nativeInst)
	start := func() agentstore.Record {
		t.Helper()
		var rec agentstore.Record
		a.mustJSON(&rec, "agent", "start", "stubborn", "native-amd64", "demo", "hello", "1", "--background")
		a.waitPane(st, rec.Pane, "stubborn ready", 15*time.Second)
		s := a.listed(rec.ID)
		if s == nil || s.Sandbox == "" {
			t.Fatalf("agent list: %+v", s)
		}
		return s.Record
	}
	windows := a.windows(st)

	// In its sandbox the provider is a process of the sandbox container:
	// stopping the container ends it whatever signals it ignores, within
	// the supervisor's escalation, and no kill by stemctl is needed. The
	// timeout is generous (stop returns as soon as the agent has ended):
	// 4 s was once too short for Podman's stop on a loaded machine.
	rec := start()
	t0 := time.Now()
	r, err := a.run("agent", "stop", "--timeout", "60s", rec.ID)
	took := time.Since(t0)
	if err != nil || r.Code != 0 || !strings.Contains(r.Stdout, "stopped agent "+rec.ID) || strings.Contains(r.Stderr, "warning") {
		t.Fatalf("agent stop: exit %d %v\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	t.Logf("agent stop of a provider that ignores signals took %s (--timeout 60s)", took)
	checkGone(t, a, st, rec, windows)

	// A supervisor that stemctl has to kill leaves its sandbox behind:
	// stop removes it.
	rec = start()
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, err = a.run("agent", "stop", rec.ID)
	if err != nil || r.Code != 0 || !strings.Contains(r.Stdout, rec.ID) {
		t.Fatalf("agent stop after the supervisor was killed: exit %d %v\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
	}
	checkGone(t, a, st, rec, windows)
}

// checkGone asserts that the agent's supervisor, provider and the
// provider's process group are gone, with its window, record and files,
// and that the student's session is as it was.
func checkGone(t *testing.T, a *account, st instanceInfo, rec agentstore.Record, windows string) {
	t.Helper()
	waitEnded(t, rec, 2*time.Second)
	if rec.Sandbox != "" {
		// The provider ran in its sandbox: the sandbox is gone.
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := podmanOut(t, "container", "exists", rec.Sandbox)
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the agent's sandbox %s is left: %s", rec.Sandbox, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else if left := processGroup(rec.ProviderPID); len(left) > 0 {
		t.Fatalf("processes of the provider's group %d are left: %v", rec.ProviderPID, left)
	}
	if s := a.listed(rec.ID); s != nil {
		t.Fatalf("agent list still shows %s: %+v", rec.ID, *s)
	}
	if _, err := os.Stat(rec.Dir); !os.IsNotExist(err) {
		t.Fatalf("the agent's directory is left: %v", err)
	}
	if _, err := os.Lstat(rec.Socket); !os.IsNotExist(err) {
		t.Fatalf("the agent's socket is left: %v", err)
	}
	if w := a.windows(st); w != windows {
		t.Fatalf("the student's windows before the agent:\n%s\nafter stop:\n%s", windows, w)
	}
	now := a.status(nativeInst)
	if now.State != "running" || !now.Tmux || !now.Nvim || now.Record.ContainerID != st.Record.ContainerID {
		t.Fatalf("the student's session after stop: %+v", now)
	}
	if cmd := strings.TrimSpace(a.tmux(st, "display-message", "-p", "-t", "stem:edit", "#{pane_current_command}")); cmd != "nvim" {
		t.Fatalf("the edit window runs %q", cmd)
	}
}

// processGroup lists the processes (pid and command) whose process group
// is pgid.
func processGroup(pgid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, strconv.Itoa(pid)+" "+s[strings.IndexByte(s, '(')+1:i])
		}
	}
	return out
}
