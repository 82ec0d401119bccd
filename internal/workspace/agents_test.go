package workspace

import (
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/agentpolicy"
)

const agentsManifest = `schema = 1

[defaults.agents]
hints = false
approve = ["task_action"]

[[tasks]]
id = "1"
profiles = ["native-amd64"]

[[tasks]]
id = "exam"
profiles = ["native-amd64"]
agents = { max_level = "none" }

[[tasks]]
id = "lab"
profiles = ["native-amd64"]

[tasks.agents]
max_level = "assist"
edits = "none"
hints = true
approve = ["pane_send_keys", "gdb_continue"]

[[tasks]]
id = "noedit"
profiles = ["native-amd64"]
agents.edits = "propose"
`

func TestAgentPolicyFromManifest(t *testing.T) {
	m, err := ParseManifest("stem.toml", []byte(agentsManifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		task string
		want agentpolicy.Policy
	}{
		// The card's defaults: no cap on the level, no hints.
		{"1", agentpolicy.Policy{MaxLevel: "full", Edits: "direct", Hints: false, Approve: []string{"task_action"}}},
		{"exam", agentpolicy.Policy{MaxLevel: "none", Edits: "direct", Hints: false, Approve: []string{"task_action"}}},
		// A task's approve replaces the defaults' list.
		{"lab", agentpolicy.Policy{MaxLevel: "assist", Edits: "none", Hints: true, Approve: []string{"pane_send_keys", "gdb_continue"}}},
		// Edits other than direct lower the default max_level to assist.
		{"noedit", agentpolicy.Policy{MaxLevel: "assist", Edits: "propose", Hints: false, Approve: []string{"task_action"}}},
	} {
		task, _ := m.Task(tc.task)
		got := m.AgentPolicy(task)
		if got.MaxLevel != tc.want.MaxLevel || got.Edits != tc.want.Edits || got.Hints != tc.want.Hints || !slices.Equal(got.Approve, tc.want.Approve) {
			t.Errorf("task %s: policy %+v, want %+v", tc.task, got, tc.want)
		}
	}
	m, err = ParseManifest("stem.toml", []byte(minimalManifest))
	if err != nil {
		t.Fatal(err)
	}
	if p := m.AgentPolicy(&m.Tasks[0]); !p.IsDefault() {
		t.Errorf("a manifest without agents tables: policy %+v, want the default", p)
	}
}

// Every bad value is refused with the line it is on and what to write
// instead.
func TestAgentPolicyBadValues(t *testing.T) {
	task := "[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n"
	head := "schema = 1\n" + task
	for _, tc := range []struct{ src, want string }{
		{head + "[tasks.agents]\nmax_level = \"exam\"\n", `line 6: tasks.agents.max_level = "exam" is not a level: choose "full", "assist", "observe" or "none"`},
		{head + "[tasks.agents]\nhints = true\nedits = \"maybe\"\n", `line 7: tasks.agents.edits = "maybe" is not a way of editing: choose "direct", "propose" or "none"`},
		{head + "[tasks.agents]\n\napprove = [\"pane_run\", \"rm_rf\"]\n", `line 7: tasks.agents.approve names "rm_rf", which is not a stem-mcp tool (tools: nvim_open,`},
		{head + "[tasks.agents]\nhints = \"yes\"\n", `line 6: tasks.agents.hints must be true or false, not a string`},
		{head + "[tasks.agents]\napprove = \"task_action\"\n", `line 6: tasks.agents.approve must be a list, not a string`},
		{head + "[tasks.agents]\nmax_levl = \"observe\"\n", `line 6: unknown key tasks.agents.max_levl (did you mean "max_level"?)`},
		{"schema = 1\n[defaults.agents]\nmax_level = \"admin\"\n" + task, `line 3: defaults.agents.max_level = "admin" is not a level`},
		{head + "agents = { max_level = 3 }\n", `line 5: tasks.agents.max_level = "3" is not a level`},
		// full with edits none: full edits through its shell.
		{head + "\n[tasks.agents]\nmax_level = \"full\"\nedits = \"none\"\n", `line 8: edits = "none" with max_level = "full" (from [tasks.agents])`},
		{"schema = 1\n[defaults.agents]\nmax_level = \"full\"\n" + task + "agents.edits = \"propose\"\n", `line 7: edits = "propose" with max_level = "full" (from [defaults.agents])`},
		{head + "agents = { max_level = \"full\", edits = \"none\" }\n", `line 5: edits = "none"`},
		{"schema = 1\n[defaults.agents]\nedits = \"none\"\n" + task + "[tasks.agents]\nmax_level = \"full\"\n", `line 3: edits = "none" with max_level = "full" (from [tasks.agents])`},
	} {
		_, err := ParseManifest("stem.toml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %q", tc.src, err, tc.want)
		}
	}
}

// The line finder reads the forms the manifest docs show.
func TestAgentsKeyLine(t *testing.T) {
	data := []byte(agentsManifest)
	for _, tc := range []struct {
		task int
		key  string
		want int
	}{{-1, "hints", 4}, {-1, "approve", 5}, {1, "max_level", 14}, {2, "edits", 22}, {3, "edits", 29}, {0, "edits", 0}} {
		if got := agentsKeyLine(data, tc.task, tc.key); got != tc.want {
			t.Errorf("task %d key %s: line %d, want %d", tc.task, tc.key, got, tc.want)
		}
	}
}
