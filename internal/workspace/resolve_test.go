package workspace

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/profiles"
)

// writeFiles creates files (path -> content) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const bssManifest = `
schema = 1
title = "bss"

[defaults]
debug = "gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf"
debug_program = "qemu-system-riscv32 -S -gdb tcp:127.0.0.1:1234 -kernel main.elf"

[[tasks]]
id = "1"
profiles = ["hazard3-sim"]
dir = "t1"

[[tasks]]
id = "2"
profiles = ["hazard3-sim"]
dir = "t2"

[[tasks]]
id = "3"
profiles = ["hazard3-sim"]
dir = "t3"

[[tasks]]
id = "t4"
title = "Four"
profiles = ["hazard3-sim", "rp2350"]
targets = ["rp2350-rv"]
dir = "t4"
build = "make"

[tasks.overrides.rp2350]
debug_program = "make gdbserver"
debug = "gdb-multiarch -q -ex 'target extended-remote 127.0.0.1:3333' main.elf"

[tasks.overrides.rp2350-rv]
build = "make TARGET=rp2350-rv"
`

const helloManifest = `
schema = 1

[[tasks]]
id = "1"
profiles = ["native-amd64"]

[[tasks]]
id = "3"
profiles = ["rp2350"]
targets = ["rp2350-arm", "rp2350-rv"]
build = "make"

[tasks.overrides.rp2350-arm]
build = "make TARGET=rp2350-arm"

[tasks.overrides.rp2350-rv]
build = "make TARGET=rp2350-rv"

[[tasks]]
id = "armonly"
profiles = ["rp2350"]
targets = ["rp2350-arm"]
`

// testWorkspace builds inf/bss, inf/stack, demo/hello plus things that are
// not cards, and opens it.
func testWorkspace(t *testing.T) *Workspace {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"inf/bss/stem.toml":       bssManifest,
		"inf/stack/stem.toml":     minimalManifest,
		"demo/hello/stem.toml":    helloManifest,
		"inf/notes/readme.txt":    "a directory without stem.toml is not a card",
		"inf/Bad-Name/stem.toml":  minimalManifest, // not a valid card name: ignored
		"empty/.keep":             "",              // a series needs a card
		"Upper/card/stem.toml":    minimalManifest, // not a valid series name
		"loose-file.txt":          "",
		"inf/bss/t1/.keep":        "",
		"inf/bss/t4/.keep":        "",
		"inf/bad/stem.toml":       "schema = 2\n",
		"inf/stem.toml":           "a series is not a card",
		"demo/hello/t1/Makefile":  "",
		"demo/hello/t3/Makefile":  "",
		"inf/stack/sub/stem.toml": minimalManifest, // nested deeper: not a card of inf
	})
	ws, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestDefaultRoot(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := DefaultRoot(getenv, "/home/ala"); got != "/home/ala/dev/workspace/stem" {
		t.Errorf("default = %q", got)
	}
	env["STEM_WORKSPACE"] = "/srv/ws"
	if got := DefaultRoot(getenv, "/home/ala"); got != "/srv/ws" {
		t.Errorf("STEM_WORKSPACE = %q", got)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "STEM_WORKSPACE") {
		t.Errorf("missing workspace: err = %v", err)
	}
	file := filepath.Join(dir, "file")
	writeFiles(t, dir, map[string]string{"file": ""})
	if _, err := Open(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file: err = %v", err)
	}
	// A symlinked workspace resolves to its real path (instances record it).
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("symlinks:", err)
	}
	ws, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(real)
	if ws.Root != want {
		t.Errorf("Root = %q, want %q", ws.Root, want)
	}
}

func TestSeriesAndCards(t *testing.T) {
	ws := testWorkspace(t)
	series, err := ws.Series()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(series, " "); got != "demo inf" {
		t.Errorf("Series = %q, want %q", got, "demo inf")
	}
	cards, err := ws.Cards("inf")
	if err != nil {
		t.Fatal(err)
	}
	// bad is listed (it has a stem.toml); loading it reports the error.
	if got := strings.Join(cards, " "); got != "bad bss stack" {
		t.Errorf("Cards(inf) = %q, want %q", got, "bad bss stack")
	}
	if _, err := ws.Cards("nope"); err == nil {
		t.Error("Cards(nope): no error")
	}
	p, err := ws.CardPath("inf", "bss")
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(ws.Root, "inf", "bss") {
		t.Errorf("CardPath = %q", p)
	}
}

func notFound(t *testing.T, err error, kind, name string) *NotFoundError {
	t.Helper()
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v (%T), want *NotFoundError", err, err)
	}
	if nf.Kind != kind || nf.Name != name {
		t.Fatalf("NotFoundError{Kind: %q, Name: %q}, want %q %q", nf.Kind, nf.Name, kind, name)
	}
	return nf
}

func TestResolveUnknownNames(t *testing.T) {
	ws := testWorkspace(t)
	cases := []struct {
		name                                string
		profile, series, card, task, target string
		kind, bad                           string
		candidates                          string // joined with " "
		suggest                             string // "" = no suggestion
	}{
		{"series typo", "", "ifn", "bss", "1", "", "series", "ifn", "demo inf", "inf"},
		{"series far", "", "math", "bss", "1", "", "series", "math", "demo inf", ""},
		{"series upper case", "", "INF", "bss", "1", "", "series", "INF", "demo inf", ""},
		{"series not a card holder", "", "empty", "bss", "1", "", "series", "empty", "demo inf", ""},
		{"series path", "", "../inf", "bss", "1", "", "series", "../inf", "demo inf", ""},
		{"card typo", "", "inf", "bsss", "1", "", "card", "bsss", "bad bss stack", "bss"},
		{"card without manifest", "", "inf", "notes", "1", "", "card", "notes", "bad bss stack", ""},
		{"card invalid name", "", "inf", "Bad-Name", "1", "", "card", "Bad-Name", "bad bss stack", ""},
		{"card path", "", "inf", "bss/t1", "1", "", "card", "bss/t1", "bad bss stack", ""},
		{"task", "", "inf", "bss", "5", "", "task", "5", "1 2 3 4", ""},
		{"task t-form", "", "inf", "bss", "t5", "", "task", "t5", "1 2 3 4", ""},
		{"task empty", "", "inf", "bss", "", "", "task", "", "1 2 3 4", ""},
		{"profile typo", "hazard3_sim", "inf", "bss", "1", "", "profile", "hazard3_sim", "hazard3-sim native-amd64 rp2350", "hazard3-sim"},
		{"profile far", "esp32", "inf", "bss", "1", "", "profile", "esp32", "hazard3-sim native-amd64 rp2350", ""},
		{"target typo", "rp2350", "demo", "hello", "3", "rp2350-am", "target", "rp2350-am", "rp2350-rv rp2350-arm", "rp2350-arm"},
		{"target of another profile", "hazard3-sim", "inf", "bss", "1", "rp2350-rv", "target", "rp2350-rv", "rv32", ""},
		{"target on a single-target profile", "native-amd64", "demo", "hello", "1", "x86", "target", "x86", "amd64", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ws.Resolve(tc.profile, tc.series, tc.card, tc.task, tc.target)
			if err == nil {
				t.Fatalf("resolved %+v", r)
			}
			nf := notFound(t, err, tc.kind, tc.bad)
			if got := strings.Join(nf.Candidates, " "); got != tc.candidates {
				t.Errorf("candidates = %q, want %q", got, tc.candidates)
			}
			msg := err.Error()
			for _, c := range nf.Candidates {
				if !strings.Contains(msg, c) {
					t.Errorf("message %q does not list %q", msg, c)
				}
			}
			hint := "did you mean"
			if tc.suggest == "" {
				if strings.Contains(msg, hint) {
					t.Errorf("message %q suggests something; want no suggestion", msg)
				}
			} else if !strings.Contains(msg, hint+` "`+tc.suggest+`"?`) {
				t.Errorf("message %q does not suggest %q", msg, tc.suggest)
			}
			// The error is JSON-friendly for stemctl --json.
			if _, err := json.Marshal(nf); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestResolveBadCard(t *testing.T) {
	ws := testWorkspace(t)
	_, err := ws.Resolve("", "inf", "bad", "1", "")
	if err == nil || !strings.Contains(err.Error(), "schema = 2") || !strings.Contains(err.Error(), filepath.Join("inf", "bad", "stem.toml")) {
		t.Fatalf("err = %v", err)
	}
}

func TestResolveProfileMismatch(t *testing.T) {
	ws := testWorkspace(t)
	_, err := ws.Resolve("native-amd64", "inf", "bss", "4", "")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"task 4 of inf/bss", "hazard3-sim or rp2350", "not on native-amd64"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var nf *NotFoundError
	if errors.As(err, &nf) {
		t.Errorf("a known profile the task does not use is not 'unknown': %v", err)
	}
}

func TestResolveTaskIDAndDefaults(t *testing.T) {
	ws := testWorkspace(t)
	for _, id := range []string{"4", "t4", "T4"} {
		r, err := ws.Resolve("hazard3-sim", "inf", "bss", id, "")
		if err != nil {
			t.Fatalf("task %q: %v", id, err)
		}
		if r.TaskID != "4" || r.TaskTitle != "Four" {
			t.Errorf("task %q: TaskID %q title %q", id, r.TaskID, r.TaskTitle)
		}
		if r.Series != "inf" || r.Card != "bss" || r.Workspace != ws.Root {
			t.Errorf("resolved %+v", r)
		}
		if r.CardPath != filepath.Join(ws.Root, "inf", "bss") || r.TaskDir != filepath.Join(ws.Root, "inf", "bss", "t4") {
			t.Errorf("paths: card %q task %q", r.CardPath, r.TaskDir)
		}
		if !filepath.IsAbs(r.TaskDir) {
			t.Errorf("TaskDir %q is not absolute", r.TaskDir)
		}
	}

	// No profile: the task's first one.
	r, err := ws.Resolve("", "inf", "bss", "4", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Profile.Name != "hazard3-sim" || r.Target.Name != "rv32" {
		t.Errorf("profile %q target %q", r.Profile.Name, r.Target.Name)
	}
	// Task build, card defaults for debug, profile defaults for the rest.
	p, _ := profiles.Get("hazard3-sim")
	want := Commands{
		Build:        "make",
		Test:         p.Commands.Test,
		Run:          p.Commands.Run,
		Debug:        "gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf",
		DebugProgram: "qemu-system-riscv32 -S -gdb tcp:127.0.0.1:1234 -kernel main.elf",
	}
	if r.Commands != want {
		t.Errorf("commands\n got %+v\nwant %+v", r.Commands, want)
	}
	if r.Manifest == nil || len(r.Manifest.Tasks) != 4 {
		t.Errorf("Manifest = %+v", r.Manifest)
	}

	// A task without dir works in the card directory; a card without any
	// commands gets the profile's defaults.
	r, err = ws.Resolve("", "inf", "stack", "1", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.TaskDir != r.CardPath {
		t.Errorf("TaskDir %q, want the card %q", r.TaskDir, r.CardPath)
	}
	np, _ := profiles.Get("native-amd64")
	if r.Commands.Build != np.Commands.Build || r.Commands.Debug != np.Commands.Debug || r.Commands.DebugProgram != "" || r.Commands.Deploy != "" {
		t.Errorf("native defaults: %+v", r.Commands)
	}
	if r.Target.Name != "amd64" {
		t.Errorf("target %q", r.Target.Name)
	}
}

func TestResolveRP2350Targets(t *testing.T) {
	ws := testWorkspace(t)

	// No target: the task's first target (here rp2350-arm, not the profile's default).
	r, err := ws.Resolve("rp2350", "demo", "hello", "3", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Target.Name != "rp2350-arm" || r.Target.Suffix != "arm" || r.Commands.Build != "make TARGET=rp2350-arm" {
		t.Errorf("default: target %+v build %q", r.Target, r.Commands.Build)
	}
	// rp2350 has a default deploy command.
	if r.Commands.Deploy == "" {
		t.Error("rp2350 deploy is empty")
	}

	r, err = ws.Resolve("rp2350", "demo", "hello", "t3", "rp2350-rv")
	if err != nil {
		t.Fatal(err)
	}
	if r.Target.Name != "rp2350-rv" || r.Target.Arch != "riscv32" || r.Commands.Build != "make TARGET=rp2350-rv" {
		t.Errorf("rp2350-rv: target %+v build %q", r.Target, r.Commands.Build)
	}

	// The task is for Arm only.
	_, err = ws.Resolve("rp2350", "demo", "hello", "armonly", "rp2350-rv")
	if err == nil || !strings.Contains(err.Error(), "is for target rp2350-arm, not rp2350-rv") {
		t.Errorf("arm-only task on rv: err = %v", err)
	}
	r, err = ws.Resolve("", "demo", "hello", "armonly", "")
	if err != nil || r.Target.Name != "rp2350-arm" {
		t.Errorf("arm-only task default: %v %+v", err, r)
	}

	// A task on two profiles: overrides per profile, then per target.
	r, err = ws.Resolve("rp2350", "inf", "bss", "4", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Target.Name != "rp2350-rv" {
		t.Errorf("target %q", r.Target.Name)
	}
	if r.Commands.Build != "make TARGET=rp2350-rv" { // target override
		t.Errorf("build %q", r.Commands.Build)
	}
	if r.Commands.DebugProgram != "make gdbserver" || !strings.Contains(r.Commands.Debug, "3333") { // profile override over card defaults
		t.Errorf("debug %q / %q", r.Commands.DebugProgram, r.Commands.Debug)
	}
	// The task lists only rp2350-rv; rp2350-arm is refused.
	_, err = ws.Resolve("rp2350", "inf", "bss", "4", "rp2350-arm")
	if err == nil || !strings.Contains(err.Error(), "is for target rp2350-rv") {
		t.Errorf("err = %v", err)
	}
	// The same task on hazard3-sim does not see the rp2350 overrides.
	r, err = ws.Resolve("hazard3-sim", "inf", "bss", "4", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Commands.Build != "make" || strings.Contains(r.Commands.Debug, "3333") {
		t.Errorf("hazard3-sim commands %+v", r.Commands)
	}
}

func TestNotFoundErrorMessage(t *testing.T) {
	e := &NotFoundError{Kind: "card", Name: "bsss", Where: "series inf", Candidates: []string{"bss", "stack"}}
	want := `unknown card "bsss" in series inf: did you mean "bss"? (cards: bss, stack)`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	e = &NotFoundError{Kind: "series", Name: "x", Where: "/ws"}
	want = `unknown series "x" in /ws (there are no series entries there)`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
}

func TestClosest(t *testing.T) {
	cands := []string{"1", "2", "3", "4", "12", "bss", "stack", "hazard3-sim"}
	cases := map[string]string{
		"bs":          "bss",
		"bsss":        "bss",
		"sbs":         "bss",
		"stak":        "stack",
		"hazard3_sim": "hazard3-sim",
		"hazard3":     "", // 4 edits away
		"5":           "", // a single digit is "close" to every other digit
		"t5":          "",
		"13":          "12",
		"":            "",
		"xyz":         "",
	}
	for name, want := range cases {
		if got := closest(name, cands); got != want {
			t.Errorf("closest(%q) = %q, want %q", name, got, want)
		}
	}
	if d := levenshtein("kitten", "sitting"); d != 3 {
		t.Errorf("levenshtein = %d", d)
	}
	if d := levenshtein(strings.Repeat("a", 65), "a"); d != 99 {
		t.Errorf("long input: %d", d)
	}
}
