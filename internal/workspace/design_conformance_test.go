package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The design contract's agent commands, resolved against the example
// workspace as `stemctl agent start` resolves them (the same resolver as
// `stemctl debug`):
//
//	stemctl agent start codex hazard3-sim inf bss 4
//	stemctl agent start codex rp2350 inf bss 4 --target rp2350-rv
//
// Each gives the agent build, run and debug commands (its minimal context).
func TestDesignAgentStartExamplesResolve(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profile, target string
		wantTarget      string
	}{
		{"hazard3-sim", "", "rv32"},
		{"rp2350", "rp2350-rv", "rp2350-rv"},
	} {
		r, err := ws.Resolve(c.profile, "inf", "bss", "4", c.target)
		if err != nil {
			t.Errorf("%s inf bss 4 --target %q: %v", c.profile, c.target, err)
			continue
		}
		if r.Profile.Name != c.profile || r.Target.Name != c.wantTarget || r.TaskID != "4" {
			t.Errorf("%s inf bss 4 --target %q resolved to %s/%s task %s", c.profile, c.target, r.Profile.Name, r.Target.Name, r.TaskID)
		}
		for what, cmd := range map[string]string{"build": r.Commands.Build, "run": r.Commands.Run, "debug": r.Commands.Debug} {
			if strings.TrimSpace(cmd) == "" {
				t.Errorf("%s inf bss 4 (%s): no %s command for the agent's context", c.profile, c.wantTarget, what)
			}
		}
	}
}

// "Pure RISC-V assembly tasks stay on hazard3-sim or rp2350-rv": an example
// task whose directory holds assembly sources and no C may only declare
// those.
func TestDesignPureAssemblyTasksStayOnRISCV(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	series, err := os.ReadDir(ws.Root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range series {
		cards, _ := os.ReadDir(filepath.Join(ws.Root, s.Name()))
		for _, c := range cards {
			cardPath := filepath.Join(ws.Root, s.Name(), c.Name())
			m, err := LoadManifest(cardPath)
			if err != nil {
				continue
			}
			for _, task := range m.Tasks {
				ents, err := os.ReadDir(filepath.Join(cardPath, task.Dir))
				if err != nil {
					t.Fatalf("%s/%s task %s: %v", s.Name(), c.Name(), task.ID, err)
				}
				asm, cfiles := false, false
				for _, e := range ents {
					switch filepath.Ext(e.Name()) {
					case ".S", ".s":
						asm = true
					case ".c":
						cfiles = true
					}
				}
				checked++
				if !asm || cfiles {
					continue
				}
				for _, p := range task.Profiles {
					if p != "hazard3-sim" && p != "rp2350" {
						t.Errorf("%s/%s task %s is pure assembly but runs on %s", s.Name(), c.Name(), task.ID, p)
					}
					if p == "rp2350" && (len(task.Targets) == 0 || slices.ContainsFunc(task.Targets, func(tg string) bool { return tg != "rp2350-rv" })) {
						t.Errorf("%s/%s task %s is pure assembly but its rp2350 targets are %v (only rp2350-rv)", s.Name(), c.Name(), task.ID, task.Targets)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no example task was checked")
	}
}
