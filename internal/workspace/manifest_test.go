package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimalManifest = `
schema = 1
title = "t"

[[tasks]]
id = "1"
profiles = ["native-amd64"]
`

func TestParseManifestMinimal(t *testing.T) {
	m, err := ParseManifest("stem.toml", []byte(minimalManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Schema != 1 || m.Title != "t" || len(m.Tasks) != 1 {
		t.Fatalf("got %+v", m)
	}
	task := m.Tasks[0]
	if task.ID != "1" || task.Dir != "" || len(task.Targets) != 0 || task.Commands != (Commands{}) {
		t.Fatalf("task = %+v", task)
	}
}

func TestParseManifestAllKeys(t *testing.T) {
	src := `
schema = 1
title = "All keys"

[defaults]
build = "make"
test = "make test"
run = "make run"
debug = "gdb -q ./main"
deploy = "make deploy"
debug_program = "make server"

[[tasks]]
id = "t3"
title = "Three"
profiles = ["rp2350"]
targets = ["rp2350-rv", "rp2350-arm"]
dir = "tasks/t3"
build = "make all"
test = "make check"
run = "make go"
debug = "gdb-multiarch x.elf"
deploy = "make flash"
debug_program = "make gdbserver"

[tasks.overrides.rp2350]
run = "make run-board"

[tasks.overrides.rp2350-arm]
build = "make TARGET=arm"
debug_program = "make gdbserver TARGET=arm"
`
	m, err := ParseManifest("stem.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Commands{Build: "make", Test: "make test", Run: "make run", Debug: "gdb -q ./main", Deploy: "make deploy", DebugProgram: "make server"}
	if m.Defaults.Commands != want {
		t.Errorf("defaults = %+v, want %+v", m.Defaults, want)
	}
	task, ok := m.Task("3")
	if !ok {
		t.Fatalf("task 3 not found in %v", m.TaskIDs())
	}
	if task.ID != "3" || task.Title != "Three" || task.Dir != "tasks/t3" {
		t.Errorf("task = %+v", task)
	}
	if strings.Join(task.Targets, ",") != "rp2350-rv,rp2350-arm" {
		t.Errorf("targets = %v", task.Targets)
	}
	wantTask := Commands{Build: "make all", Test: "make check", Run: "make go", Debug: "gdb-multiarch x.elf", Deploy: "make flash", DebugProgram: "make gdbserver"}
	if task.Commands != wantTask {
		t.Errorf("task commands = %+v, want %+v", task.Commands, wantTask)
	}
	if got := task.Overrides["rp2350-arm"]; got.Build != "make TARGET=arm" || got.DebugProgram != "make gdbserver TARGET=arm" || got.Run != "" {
		t.Errorf("overrides[rp2350-arm] = %+v", got)
	}
	if got := task.Overrides["rp2350"]; got.Run != "make run-board" {
		t.Errorf("overrides[rp2350] = %+v", got)
	}
}

// task ids: "4" and "t4" (any case) name the same task.
func TestTaskIDForms(t *testing.T) {
	src := `
schema = 1
[[tasks]]
id = "t4"
profiles = ["hazard3-sim"]
[[tasks]]
id = "T5"
profiles = ["hazard3-sim"]
[[tasks]]
id = "test"
profiles = ["hazard3-sim"]
[[tasks]]
id = "2b"
profiles = ["hazard3-sim"]
`
	m, err := ParseManifest("stem.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.TaskIDs(), " "); got != "4 5 test 2b" {
		t.Fatalf("TaskIDs = %q, want %q", got, "4 5 test 2b")
	}
	for _, q := range []string{"4", "t4", "T4", " t4 ", "5", "t5", "test", "2b", "t2b"} {
		if _, ok := m.Task(q); !ok {
			t.Errorf("Task(%q) not found", q)
		}
	}
	// "t" followed by a letter is a name, not a prefix.
	if task, ok := m.Task("test"); !ok || task.ID != "test" {
		t.Errorf("Task(test) = %v, %v", task, ok)
	}
	for _, q := range []string{"6", "t6", "t", "tt4", "04", ""} {
		if task, ok := m.Task(q); ok {
			t.Errorf("Task(%q) found %q", q, task.ID)
		}
	}
}

func TestParseManifestErrors(t *testing.T) {
	task := func(extra string) string {
		return "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n" + extra
	}
	cases := []struct {
		name string
		src  string
		want string // substring of the error
	}{
		{"not toml", "schema = = 1", "parse"},
		{"unknown top-level key", task("") + "\nauthor = \"x\"\n", "unknown key"},
		{"unknown top-level key names it", "schema = 1\nauthor = \"x\"\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n", "author"},
		{"unknown task key", task("bulid = \"make\"\n"), "tasks.bulid"},
		{"unknown defaults key", "schema = 1\n[defaults]\nflash = \"x\"\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n", "defaults.flash"},
		{"unknown override key", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"rp2350\"]\n[tasks.overrides.rp2350-rv]\nbulid = \"x\"\n", "tasks.overrides.rp2350-rv.bulid"},
		{"unknown table", task("[tasks.debugger]\nport = 1\n"), "unknown key"},
		{"schema missing", "[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n", "schema = 0 is not supported"},
		{"schema too new", "schema = 2\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n", "schema = 2 is not supported"},
		{"schema as string", "schema = \"1\"\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n", "line 1: schema must be a number, not a string"},
		{"no tasks", "schema = 1\ntitle = \"empty\"\n", "no [[tasks]]"},
		{"duplicate id", task("[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n"), "task 1 is declared twice"},
		{"duplicate id t-form", task("[[tasks]]\nid = \"t1\"\nprofiles = [\"native-amd64\"]\n"), "task 1 is declared twice"},
		{"id missing", "schema = 1\n[[tasks]]\nprofiles = [\"native-amd64\"]\n", "id \"\""},
		{"id integer", "schema = 1\n[[tasks]]\nid = 4\nprofiles = [\"native-amd64\"]\n", `line 3: tasks.id must be a string, not a number (put it in quotes, e.g. id = "4")`},
		{"id with dash", "schema = 1\n[[tasks]]\nid = \"4-a\"\nprofiles = [\"native-amd64\"]\n", "lower-case letters, digits or '_'"},
		{"id with space", "schema = 1\n[[tasks]]\nid = \"4 a\"\nprofiles = [\"native-amd64\"]\n", "must be"},
		{"id too long", "schema = 1\n[[tasks]]\nid = \"abcdefghijklm\"\nprofiles = [\"native-amd64\"]\n", "at most 12"},
		{"id starts with underscore", "schema = 1\n[[tasks]]\nid = \"_1\"\nprofiles = [\"native-amd64\"]\n", "must be"},
		{"profiles missing", "schema = 1\n[[tasks]]\nid = \"1\"\n", "profiles is empty"},
		{"profiles empty", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = []\n", "profiles is empty"},
		{"profiles as string", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = \"native-amd64\"\n", "tasks.profiles must be a list, not a string"},
		{"unknown profile", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"hazard3_sim\"]\n", `unknown profile "hazard3_sim" in profiles: did you mean "hazard3-sim"?`},
		{"unknown target", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"rp2350\"]\ntargets = [\"rp2350-riscv\"]\n", `unknown target "rp2350-riscv"`},
		{"target of another profile", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"rp2350\"]\ntargets = [\"rv32\"]\n", `unknown target "rv32"`},
		{"misspelt override", "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"rp2350\"]\n[tasks.overrides.rp2350_rv]\nbuild = \"x\"\n", `unknown override "rp2350_rv" in [tasks.overrides]: did you mean "rp2350-rv"?`},
		{"override for a profile the task does not use", task("[tasks.overrides.hazard3-sim]\nbuild = \"x\"\n"), `unknown override "hazard3-sim"`},
		{"absolute dir", task("dir = \"/etc\"\n"), "must be a relative path inside the card"},
		{"dir escapes", task("dir = \"../other\"\n"), "must be a relative path"},
		{"dir escapes in the middle", task("dir = \"t1/../../x\"\n"), "must be a relative path"},
		{"dir with backslash", task("dir = \"t1\\\\x\"\n"), "must be a relative path"},
		{"dir with space", task("dir = \"my task\"\n"), "must be a relative path"},
		{"dir starting with dash", task("dir = \"-rf\"\n"), "must be a relative path"},
		{"editable empty pattern", task("editable = [\"\"]\n"), "card-relative glob"},
		{"editable absolute", task("editable = [\"/etc/passwd\"]\n"), "card-relative glob"},
		{"editable escapes", task("editable = [\"../x/*.c\"]\n"), "card-relative glob"},
		{"editable bad glob", task("editable = [\"t1/[.c\"]\n"), "card-relative glob"},
		{"editable as string", task("editable = \"t1/*.c\"\n"), "tasks.editable"},
		{"dir too long", task("dir = \"" + strings.Repeat("a", 129) + "\"\n"), "must be a relative path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest("card/stem.toml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error; manifest %+v", m)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "card/stem.toml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestParseManifestGoodDirs(t *testing.T) {
	for _, dir := range []string{"t1", "tasks/t1", "./t1", "t_1.x", "T1", "a/b/c/", "."} {
		src := "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\ndir = \"" + dir + "\"\n"
		if _, err := ParseManifest("stem.toml", []byte(src)); err != nil {
			t.Errorf("dir %q: %v", dir, err)
		}
	}
}

func TestParseManifestEditable(t *testing.T) {
	src := "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\neditable = [\"t1/*.c\", \"t1/start.S\", \"t1/sub/**\", \"README.md\"]\n"
	m, err := ParseManifest("stem.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Tasks[0].Editable, " "); got != "t1/*.c t1/start.S t1/sub/** README.md" {
		t.Errorf("editable = %q", got)
	}
}

func TestParseManifestGoodOverrideKeys(t *testing.T) {
	src := `
schema = 1
[[tasks]]
id = "1"
profiles = ["hazard3-sim", "rp2350"]
[tasks.overrides.hazard3-sim]
build = "a"
[tasks.overrides.rv32]
build = "b"
[tasks.overrides.rp2350]
build = "c"
[tasks.overrides.rp2350-rv]
build = "d"
[tasks.overrides.rp2350-arm]
build = "e"
`
	if _, err := ParseManifest("stem.toml", []byte(src)); err != nil {
		t.Fatal(err)
	}
}

func TestNameRules(t *testing.T) {
	good := []string{"inf", "bss", "demo", "a", "a_1", "9", "x9_", strings.Repeat("a", 24)}
	bad := []string{"", "Inf", "b-ss", "_x", "a b", "a.b", "a/b", "ąb", strings.Repeat("a", 25), "..", "-x"}
	for _, s := range good {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range bad {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
	goodIDs := []string{"4", "12", "2b", "bonus", "a_1", strings.Repeat("9", 12)}
	badIDs := []string{"", "T4", "4-a", "_4", "4.1", strings.Repeat("9", 13)}
	for _, s := range goodIDs {
		if !ValidTaskID(s) {
			t.Errorf("ValidTaskID(%q) = false", s)
		}
	}
	for _, s := range badIDs {
		if ValidTaskID(s) {
			t.Errorf("ValidTaskID(%q) = true", s)
		}
	}
}

// Precedence: target override > profile override > task > card defaults >
// profile defaults, field by field.
func TestEffectiveCommandsPrecedence(t *testing.T) {
	task := Task{
		Commands: Commands{Build: "task-build", Test: "task-test", Run: "task-run"},
		Overrides: map[string]Commands{
			"rp2350":     {Build: "profile-build", Test: "profile-test"},
			"rp2350-arm": {Build: "target-build"},
			"rp2350-rv":  {Build: "other-target-build", Debug: "other-target-debug"},
		},
	}
	defaults := Commands{Build: "card-build", Run: "card-run", Debug: "card-debug"}
	profileDefaults := Commands{Build: "p-build", Test: "p-test", Run: "p-run", Debug: "p-debug", Deploy: "p-deploy"}

	got := task.EffectiveCommands(defaults, "rp2350", "rp2350-arm", profileDefaults)
	want := Commands{
		Build:  "target-build", // target override
		Test:   "profile-test", // profile override
		Run:    "task-run",     // task
		Debug:  "card-debug",   // card defaults
		Deploy: "p-deploy",     // profile defaults
	}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	// No target: the profile override is the most specific.
	got = task.EffectiveCommands(defaults, "rp2350", "", profileDefaults)
	if got.Build != "profile-build" {
		t.Errorf("no target: build = %q, want profile-build", got.Build)
	}
	// A profile without overrides: the task's own commands.
	got = task.EffectiveCommands(defaults, "hazard3-sim", "rv32", profileDefaults)
	if got.Build != "task-build" || got.Test != "task-test" || got.Debug != "card-debug" {
		t.Errorf("hazard3-sim: got %+v", got)
	}
	// Nothing anywhere but the profile defaults.
	empty := Task{}
	got = empty.EffectiveCommands(Commands{}, "native-amd64", "amd64", profileDefaults)
	if got != profileDefaults {
		t.Errorf("empty task: got %+v, want %+v", got, profileDefaults)
	}
	// debug_program has no profile default: it stays empty unless a card sets it.
	if got.DebugProgram != "" {
		t.Errorf("DebugProgram = %q", got.DebugProgram)
	}
}

func TestLoadManifest(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadManifest(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing manifest: err = %v, want ErrNotExist", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(minimalManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tasks) != 1 {
		t.Fatalf("tasks = %v", m.TaskIDs())
	}

	big := minimalManifest + "# " + strings.Repeat("x", maxManifestBytes) + "\n"
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("large manifest: err = %v", err)
	}
}

// Name and task id lengths, each bound and one past it.
func TestNameLengthLimits(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	if !ValidName(a(24)) || ValidName(a(25)) || ValidName("") || ValidName("_a") {
		t.Error("series/card names: 1-24 of [a-z0-9_], not starting with _")
	}
	if !ValidTaskID(a(12)) || ValidTaskID(a(13)) || ValidTaskID("") {
		t.Error("task ids: 1-12")
	}
}
