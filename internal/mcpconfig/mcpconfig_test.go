package mcpconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

var anna = Entry{
	Name:    "stem-anna",
	Command: "ssh",
	Args:    []string{"-T", "-i", "/home/t/.ssh/stem_kowalski", "-o", "BatchMode=yes", "anna@lab-03", "mcp", "hazard3-sim-inf-bss-t4"},
}

const codexWithOthers = `# Codex settings, kept by hand.
model = "o3" # inline comment
approval_policy = "on-request"

# The docs server.
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[mcp_servers.docs.env]
TOKEN = "x"

[profiles.fast]
model = "o4-mini"
notes = """
[mcp_servers.stem-anna]
this is text, not a table
"""

[[stem_test_list]]
name = "a"
`

func decodeTOMLFile(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m := map[string]any{}
	if _, err := toml.Decode(string(data), &m); err != nil {
		t.Fatalf("result is not valid TOML: %v\n%s", err, data)
	}
	return m
}

func codexServer(t *testing.T, m map[string]any, name string) map[string]any {
	t.Helper()
	s, _ := m["mcp_servers"].(map[string]any)
	e, ok := s[name].(map[string]any)
	if !ok {
		t.Fatalf("mcp_servers.%s missing in %v", name, m)
	}
	return e
}

func TestCodexMergeKeepsEverythingElse(t *testing.T) {
	out, err := Codex.Merge([]byte(codexWithOthers), anna)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), codexWithOthers) {
		t.Fatalf("the original text is not kept byte for byte:\n%s", out)
	}
	m := decodeTOMLFile(t, out)
	e := codexServer(t, m, "stem-anna")
	if e["command"] != "ssh" || !reflect.DeepEqual(e["args"], toAny(anna.Args)) {
		t.Fatalf("entry = %v", e)
	}
	docs := codexServer(t, m, "docs")
	if docs["env"].(map[string]any)["TOKEN"] != "x" {
		t.Fatalf("docs server lost its env: %v", docs)
	}
	if !strings.Contains(m["profiles"].(map[string]any)["fast"].(map[string]any)["notes"].(string), "[mcp_servers.stem-anna]") {
		t.Fatal("multi-line string changed")
	}

	// Merging again with a changed entry replaces it in place; idempotent.
	again, err := Codex.Merge(out, anna)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(out) {
		t.Fatalf("second merge changed the file:\n%s", again)
	}
	changed := anna
	changed.Args = append([]string{}, anna.Args...)
	changed.Args[len(changed.Args)-1] = "native-amd64-inf-bss-t5"
	changed.Env = map[string]string{"A B": "c\"d"}
	third, err := Codex.Merge(out, changed)
	if err != nil {
		t.Fatal(err)
	}
	e = codexServer(t, decodeTOMLFile(t, third), "stem-anna")
	if e["args"].([]any)[7] != "native-amd64-inf-bss-t5" || e["env"].(map[string]any)["A B"] != "c\"d" {
		t.Fatalf("replaced entry = %v", e)
	}
	if strings.Count(string(third), "[mcp_servers.stem-anna]") != 2 { // the table and the text in notes
		t.Fatalf("entry duplicated or lost:\n%s", third)
	}
	if !strings.HasPrefix(string(third), codexWithOthers) {
		t.Fatal("other content changed on replace")
	}
}

func TestCodexReplaceInMiddleKeepsNeighbours(t *testing.T) {
	in := `[mcp_servers.a]
command = "a"

[mcp_servers.stem-anna]
command = "old"
args = []

[mcp_servers.stem-anna.env]
OLD = "1"

# about b
[mcp_servers.b]
command = "b"
`
	out, err := Codex.Merge([]byte(in), anna)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.HasPrefix(s, "[mcp_servers.a]\ncommand = \"a\"\n\n[mcp_servers.stem-anna]\n") {
		t.Fatalf("entry not replaced in place:\n%s", s)
	}
	if !strings.HasSuffix(s, "\n# about b\n[mcp_servers.b]\ncommand = \"b\"\n") {
		t.Fatalf("following table or its comment changed:\n%s", s)
	}
	if strings.Contains(s, "OLD") || strings.Contains(s, "old") {
		t.Fatalf("old entry left behind:\n%s", s)
	}
	m := decodeTOMLFile(t, out)
	if _, ok := codexServer(t, m, "stem-anna")["env"]; ok {
		t.Fatal("old env subtable survived")
	}
	removed, found, err := Codex.Remove(out, "stem-anna")
	if err != nil || !found {
		t.Fatalf("remove: %v %v", found, err)
	}
	if string(removed) != "[mcp_servers.a]\ncommand = \"a\"\n\n# about b\n[mcp_servers.b]\ncommand = \"b\"\n" {
		t.Fatalf("remove result:\n%q", removed)
	}
}

func TestCodexRefusesWhatItCannotEditSafely(t *testing.T) {
	for name, in := range map[string]string{
		"inline":  "mcp_servers = { stem-anna = { command = \"x\" } }\n",
		"dotted":  "mcp_servers.stem-anna.command = \"x\"\n",
		"invalid": "[mcp_servers\ncommand = 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := Codex.Merge([]byte(in), anna); err == nil {
				t.Fatalf("merged into a file it cannot edit safely:\n%s", out)
			}
		})
	}
}

func TestCodexQuotedNames(t *testing.T) {
	in := "[mcp_servers.\"stem-anna\"]\ncommand = \"old\"\n\n[ mcp_servers . 'other' ] # c\ncommand = \"o\"\n"
	out, err := Codex.Merge([]byte(in), anna)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "old") {
		t.Fatalf("quoted header not recognised:\n%s", out)
	}
	if codexServer(t, decodeTOMLFile(t, out), "other")["command"] != "o" {
		t.Fatal("other lost")
	}
}

const claudeState = `{
    "numStartups": 3,
    "projects": {
        "/home/t/x": {
            "mcpServers": {
                "stem-anna": {"command": "not this one"}
            }
        }
    },
    "userID": "abc"
}
`

func decodeJSONFile(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(blankComments(data), &m); err != nil {
		t.Fatalf("result is not valid JSON: %v\n%s", err, data)
	}
	return m
}

func TestClaudeMergeIntoStateFile(t *testing.T) {
	out, err := Claude.Merge([]byte(claudeState), anna)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeJSONFile(t, out)
	e := m["mcpServers"].(map[string]any)["stem-anna"].(map[string]any)
	if e["type"] != "stdio" || e["command"] != "ssh" || !reflect.DeepEqual(e["args"], toAny(anna.Args)) {
		t.Fatalf("entry = %v", e)
	}
	if !strings.HasPrefix(string(out), strings.TrimSuffix(claudeState, "\n}\n")) {
		t.Fatalf("original members changed:\n%s", out)
	}
	if !strings.Contains(string(out), "\n    \"mcpServers\": {\n        \"stem-anna\": {\n            \"type\"") {
		t.Fatalf("indentation not followed:\n%s", out)
	}
	// Add a second student: the first entry stays byte for byte.
	bob := anna
	bob.Name = "stem-bob"
	two, err := Claude.Merge(out, bob)
	if err != nil {
		t.Fatal(err)
	}
	first := string(out[:strings.LastIndex(string(out), "}\n    }")+1])
	if !strings.HasPrefix(string(two), first) {
		t.Fatalf("first entry changed when adding the second:\n%s", two)
	}
	servers := decodeJSONFile(t, two)["mcpServers"].(map[string]any)
	if len(servers) != 2 {
		t.Fatalf("servers = %v", servers)
	}
	if again, _ := Claude.Merge(two, bob); string(again) != string(two) {
		t.Fatalf("merge is not idempotent:\n%s", again)
	}
	removed, found, err := Claude.Remove(two, "stem-anna")
	if err != nil || !found {
		t.Fatalf("remove: %v %v", found, err)
	}
	rs := decodeJSONFile(t, removed)["mcpServers"].(map[string]any)
	if _, ok := rs["stem-anna"]; ok || rs["stem-bob"] == nil {
		t.Fatalf("after remove: %v", rs)
	}
	if !strings.Contains(string(removed), `"not this one"`) {
		t.Fatal("project-level entry of the same name was touched")
	}
}

func TestGeminiKeepsCommentsAndCompactFiles(t *testing.T) {
	in := "{\n  // my settings\n  \"theme\": \"dark\", /* block */\n  \"mcpServers\": {}\n}\n"
	out, err := Gemini.Merge([]byte(in), anna)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"// my settings", "/* block */", `"theme": "dark"`} {
		if !strings.Contains(string(out), keep) {
			t.Fatalf("lost %q:\n%s", keep, out)
		}
	}
	e := decodeJSONFile(t, out)["mcpServers"].(map[string]any)["stem-anna"].(map[string]any)
	if _, hasType := e["type"]; hasType || e["command"] != "ssh" {
		t.Fatalf("gemini entry = %v", e)
	}
	compact, err := Gemini.Merge([]byte(`{"a":1,"mcpServers":{"x":{"command":"y"}}}`), anna)
	if err != nil {
		t.Fatal(err)
	}
	cm := decodeJSONFile(t, compact)
	if cm["a"].(float64) != 1 || len(cm["mcpServers"].(map[string]any)) != 2 {
		t.Fatalf("compact merge: %s", compact)
	}
	empty, err := Gemini.Merge(nil, anna)
	if err != nil {
		t.Fatal(err)
	}
	es, _ := decodeJSONFile(t, empty)["mcpServers"].(map[string]any)
	if e, _ := es["stem-anna"].(map[string]any); len(es) != 1 || e["command"] != "ssh" || !reflect.DeepEqual(e["args"], toAny(anna.Args)) {
		t.Fatalf("merge into no file: %s", empty)
	}
}

func TestJSONRefusals(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       "{ mcpServers: ",
		"array root":     "[]",
		"servers array":  `{"mcpServers": []}`,
		"trailing comma": `{"a": 1,}`,
		"duplicate":      `{"mcpServers": {"stem-anna": {}, "stem-anna": {}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := Claude.Merge([]byte(in), anna); err == nil {
				t.Fatalf("merged: %s", out)
			}
		})
	}
}

func TestEntryValidation(t *testing.T) {
	for _, e := range []Entry{
		{Name: "a b", Command: "x"},
		{Name: "", Command: "x"},
		{Name: "ok"},
		{Name: "ok", Command: "x", Args: []string{"a\nb"}},
		{Name: "-x", Command: "x"},
		{Name: "--", Command: "x"},
		{Name: strings.Repeat("a", 65), Command: "x"},
	} {
		if _, err := Codex.Merge(nil, e); err == nil {
			t.Errorf("accepted %+v", e)
		}
	}
}

// TestEntryValidationLeadingDash: a name starting with '-' would be read
// as an option by `claude mcp add ... NAME -- ssh ...`; it is refused with
// that reason, while '-' elsewhere in a name stays valid.
func TestEntryValidationLeadingDash(t *testing.T) {
	if err := (Entry{Name: strings.Repeat("a", 64), Command: "ssh"}).Validate(); err != nil {
		t.Errorf("a 64-byte name: %v", err)
	}
	for _, name := range []string{"-x", "--scope", "-"} {
		err := Entry{Name: name, Command: "ssh"}.Validate()
		if err == nil || !strings.Contains(err.Error(), "must not start with '-'") {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for _, name := range []string{"stem-anna", "a-", "_x", "0-1"} {
		if err := (Entry{Name: name, Command: "ssh"}).Validate(); err != nil {
			t.Errorf("name %q refused: %v", name, err)
		}
	}
}

// TestEntryValidationEnvNames: an invalid environment variable name is
// refused, and of several the same one (the first in sorted order) is
// named every time, not whichever map order gives first.
func TestEntryValidationEnvNames(t *testing.T) {
	e := Entry{Name: "ok", Command: "x", Env: map[string]string{"GOOD": "1"}}
	if err := e.Validate(); err != nil {
		t.Fatalf("valid env refused: %v", err)
	}
	for _, bad := range []string{"", "A=B", "NUL\x00", "NL\nX"} {
		e := Entry{Name: "ok", Command: "x", Env: map[string]string{"GOOD": "1", bad: "v"}}
		if err := e.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("env name %q: %v", bad, err)
		}
	}
	e.Env = map[string]string{}
	for i := 0; i < 8; i++ {
		e.Env[fmt.Sprintf("B%d=", i)] = "v"
		e.Env[fmt.Sprintf("OK%d", i)] = "v"
	}
	want := `MCP server ok: invalid environment variable name "B0="`
	for i := 0; i < 30; i++ {
		if err := e.Validate(); err == nil || err.Error() != want {
			t.Fatalf("several bad names, call %d: %v; want %s", i, err, want)
		}
	}
}

func TestMergeFileKeepsModeAndCreates(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "config.toml")
	if err := Codex.MergeFile(p, anna); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file mode: %v %v", fi, err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	bob := anna
	bob.Name = "stem-bob"
	if err := Codex.MergeFile(p, bob); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode not kept: %v", fi.Mode())
	}
	data, _ := os.ReadFile(p)
	m := decodeTOMLFile(t, data)
	codexServer(t, m, "stem-anna")
	codexServer(t, m, "stem-bob")
}

func TestClaudeAddArgsAndQuote(t *testing.T) {
	e := anna
	e.Env = map[string]string{"B": "2", "A": "it's"}
	got := ShellQuote(ClaudeAddArgs(e, User))
	want := `claude mcp add --scope user -e 'A=it'\''s' -e B=2 stem-anna -- ssh -T -i /home/t/.ssh/stem_kowalski -o BatchMode=yes anna@lab-03 mcp hazard3-sim-inf-bss-t4`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
