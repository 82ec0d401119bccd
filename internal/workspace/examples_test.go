package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/profiles"
)

// examplesRoot is examples/workspace of this repository.
var examplesRoot = filepath.Join("..", "..", "examples", "workspace")

// exampleRun is one way to run an example task: a (profile, target) pair
// it declares, resolved.
type exampleRun struct {
	name string // series/card/task/profile[/target]
	r    *Resolved
}

// exampleRuns resolves every task of every example card on every profile
// and target it declares.
func exampleRuns(t *testing.T, ws *Workspace) []exampleRun {
	t.Helper()
	var runs []exampleRun
	series, err := ws.Series()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		cards, err := ws.Cards(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cards {
			m, err := LoadManifest(filepath.Join(ws.Root, s, c))
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range m.Tasks {
				for _, pn := range task.Profiles {
					p, err := profiles.Get(pn)
					if err != nil {
						t.Fatal(err)
					}
					targets := []string{""}
					if p.MultiTarget() {
						targets = task.Targets
						if len(targets) == 0 {
							targets = []string{""}
						}
					}
					for _, tg := range targets {
						r, err := ws.Resolve(pn, s, c, task.ID, tg)
						if err != nil {
							t.Fatalf("%s/%s task %s on %s %s: %v", s, c, task.ID, pn, tg, err)
						}
						name := strings.Join([]string{s, c, task.ID, pn}, "/")
						if tg != "" {
							name += "/" + tg
						}
						runs = append(runs, exampleRun{name: name, r: r})
					}
				}
			}
		}
	}
	return runs
}

func TestExampleManifests(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	series, err := ws.Series()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"demo", "inf"} {
		if !contains(series, want) {
			t.Errorf("series %q missing from %v", want, series)
		}
	}

	runs := exampleRuns(t, ws)
	seen := map[string]bool{}
	for _, run := range runs {
		r := run.r
		seen[r.Profile.Name] = true
		if r.Target.Name != "" {
			seen[r.Target.Name] = true
		}
		t.Run(run.name, func(t *testing.T) {
			fi, err := os.Stat(r.TaskDir)
			if err != nil || !fi.IsDir() {
				t.Fatalf("task dir %s: %v", r.TaskDir, err)
			}
			c := r.Commands
			if c.Build == "" || c.Test == "" || c.Run == "" || c.Debug == "" {
				t.Errorf("missing commands: %+v", c)
			}
			if strings.Contains(c.Build+c.Test+c.Run, "make") {
				if _, err := os.Stat(filepath.Join(r.TaskDir, "Makefile")); err != nil {
					t.Errorf("commands use make but: %v", err)
				}
			}
			switch r.Profile.Name {
			case "hazard3-sim":
				// The debug layout: QEMU halted with its gdb stub on
				// 127.0.0.1:1234, gdb-multiarch connecting to it.
				for _, want := range []string{"qemu-system-riscv32", "-M virt", "-bios none", "-S", "-gdb tcp:127.0.0.1:1234"} {
					if !strings.Contains(c.DebugProgram, want) {
						t.Errorf("debug_program %q lacks %q", c.DebugProgram, want)
					}
				}
				if !strings.HasPrefix(c.Debug, "gdb-multiarch") || !strings.Contains(c.Debug, "target remote 127.0.0.1:1234") {
					t.Errorf("debug = %q", c.Debug)
				}
			case "native-amd64":
				if !strings.HasPrefix(c.Debug, "gdb ") {
					t.Errorf("debug = %q", c.Debug)
				}
			case "rp2350":
				if c.Deploy == "" {
					t.Error("rp2350 task without deploy")
				}
				for _, cmd := range []string{c.Build, c.Test, c.Deploy, c.DebugProgram} {
					if !strings.Contains(cmd, "TARGET="+r.Target.Name) {
						t.Errorf("command %q does not pass TARGET=%s", cmd, r.Target.Name)
					}
				}
			}
		})
	}
	for _, want := range []string{"native-amd64", "hazard3-sim", "rp2350", "rp2350-rv", "rp2350-arm"} {
		if !seen[want] {
			t.Errorf("no example task uses %s", want)
		}
	}

	// The commands the design document uses resolve as written.
	r, err := ws.Resolve("hazard3-sim", "inf", "bss", "4", "")
	if err != nil {
		t.Fatalf("stemctl agent start codex hazard3-sim inf bss 4: %v", err)
	}
	if r.TaskID != "4" || r.Target.Name != "rv32" {
		t.Errorf("inf/bss/4: %+v", r)
	}
	if _, err := ws.Resolve("hazard3-sim", "inf", "bss", "t4", ""); err != nil {
		t.Errorf("inf bss t4: %v", err)
	}
	for _, n := range []string{"1", "2", "3", "4"} {
		if _, err := ws.Resolve("", "inf", "bss", n, ""); err != nil {
			t.Errorf("inf/bss task %s: %v", n, err)
		}
	}
	for _, tg := range []string{"rp2350-rv", "rp2350-arm"} {
		r, err := ws.Resolve("rp2350", "demo", "hello", "3", tg)
		if err != nil {
			t.Errorf("demo/hello/3 on %s: %v", tg, err)
			continue
		}
		if !strings.Contains(r.Commands.Debug, "build/"+tg+"/") {
			t.Errorf("%s: debug %q does not load that target's ELF", tg, r.Commands.Debug)
		}
	}
}

// Every editable pattern of an example task names at least one file of its
// card, so a renamed file cannot silently make a task read-only.
func TestExampleEditable(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, run := range exampleRuns(t, ws) {
		for _, g := range run.r.Editable {
			n++
			pattern := filepath.Join(run.r.CardPath, filepath.FromSlash(strings.TrimSuffix(g, "/**")))
			matches, err := filepath.Glob(pattern)
			if err != nil || len(matches) == 0 {
				t.Errorf("%s: editable %q matches nothing (%v)", run.name, g, err)
			}
		}
	}
	if n == 0 {
		t.Error("no example task declares editable files")
	}
}

// Every card carries a .gitignore for .stem/ and no .git of its own (make
// demo runs git init; a nested repository cannot be committed here).
func TestExampleCardFiles(t *testing.T) {
	ws, err := Open(examplesRoot)
	if err != nil {
		t.Fatal(err)
	}
	series, _ := ws.Series()
	n := 0
	for _, s := range series {
		cards, _ := ws.Cards(s)
		for _, c := range cards {
			n++
			dir := filepath.Join(ws.Root, s, c)
			gi, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
			if err != nil {
				t.Errorf("%s/%s: %v", s, c, err)
				continue
			}
			if !strings.Contains("\n"+string(gi), "\n.stem/\n") {
				t.Errorf("%s/%s/.gitignore does not ignore .stem/", s, c)
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("%s/%s: %v", s, c, err)
			}
		}
	}
	if n < 2 {
		t.Errorf("only %d example cards", n)
	}
	// What git tracks, not what is on disk: examples/workspace may be
	// someone's workspace, whose cards then hold .stem/.
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: what the repository tracks cannot be listed")
	}
	out, err := exec.Command("git", "-C", ws.Root, "ls-files", "--stage", "--", ".").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v): what the repository tracks cannot be listed", err)
	}
	tracked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		meta, path, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		tracked++
		if strings.HasPrefix(meta, "160000 ") {
			t.Errorf("examples/workspace/%s is a repository of its own (a gitlink)", path)
		}
		for _, part := range strings.Split(path, "/") {
			if part == ".git" || part == ".stem" {
				t.Errorf("examples/workspace/%s: %s must not be in the examples", path, part)
			}
		}
	}
	if tracked == 0 {
		t.Error("git tracks nothing under examples/workspace")
	}
}
