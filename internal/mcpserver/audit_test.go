package mcpserver_test

// The audit log as the server writes it: a session with effectful and
// refused calls leaves session_start, a tool_intent and its outcome
// (tool_call, or refused) per effectful call, one refused per other
// refused call, session_end, and a chain that verifies.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
)

// readAudit returns the entries of the fixture's audit log.
func readAudit(t testing.TB, stateDir string) ([]audit.Entry, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "audit.jsonl"))
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	var out []audit.Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line is not JSON: %v\n%s", err, sc.Text())
		}
		out = append(out, e)
	}
	return out, data
}

type auditWant struct {
	event, tool, result string
	args                map[string]any
	detail              string // substring of the detail
	intent              bool   // an effectful tool: a tool_intent comes first
}

func TestAuditThroughTheServer(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	shell := st.pane("shell")
	st.waitPrompt(shell)

	// A session whose first call is refused by the schema: answered at
	// once, and its start is still logged before the refusal.
	early := connect(t, in, "observe")
	t0 := time.Now()
	early.refused("pane_list", map[string]any{"level": "full"})
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("a refused first call took %v", d)
	}
	early.c.Close()
	waitUntil(t, 10*time.Second, "the first session ends", func() bool {
		es, _ := readAudit(t, in.Dirs.State)
		return len(es) > 0 && es[len(es)-1].Event == audit.SessionEnd
	})

	// A read-only session leaves only its start and end.
	obs := connect(t, in, "observe")
	obs.ok("pane_list", nil)
	obs.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 2})
	obs.ok("session_status", nil)

	// The agent id stemctl agent start passes goes into every entry.
	s := connect(t, in, "assist", "--agent", "a1b2c3")
	var want []auditWant
	ok := func(tool string, args map[string]any) {
		t.Helper()
		s.ok(tool, args)
		want = append(want, auditWant{audit.ToolCall, tool, "ok", args, "", true})
	}
	// refused: an effectful tool refused by its handler (intent, then the
	// refusal); refusedRO: a read-only one, or one refused before any
	// handler runs (the refusal alone).
	refused := func(tool string, args map[string]any, detail string) {
		t.Helper()
		s.refused(tool, args)
		want = append(want, auditWant{audit.Refused, tool, "refused", args, detail, true})
	}
	refusedRO := func(tool string, args map[string]any, detail string) {
		t.Helper()
		s.refused(tool, args)
		want = append(want, auditWant{audit.Refused, tool, "refused", args, detail, false})
	}
	ok("nvim_open", map[string]any{"path": "t1/words.c"})
	s.ok("nvim_buffer_read", map[string]any{"path": "t1/words.c", "end": 1}) // read: not audited
	ok("nvim_buffer_edit", map[string]any{"path": "t1/words.c", "start": 1, "end": 1, "lines": []any{"#include \"words.h\" // edited"}})
	ok("nvim_hint", map[string]any{"path": "t1/words.c", "line": 2, "text": "look here"})
	refused("pane_send_keys", map[string]any{"pane": shell, "keys": "echo AUDIT-KEYS{Enter}"}, "stemctl allow")
	s.ok("nvim_open", map[string]any{"path": "t1/hello.c"})
	want = append(want, auditWant{audit.ToolCall, "nvim_open", "ok", map[string]any{"path": "t1/hello.c"}, "", true})
	refused("nvim_buffer_edit", map[string]any{"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"x"}}, "not editable")
	refused("nvim_open", map[string]any{"path": "../outside/secret.txt"}, "leaves the card")
	refusedRO("gdb_print", map[string]any{"expression": "system(\"id\")"}, "")
	ok("task_action", map[string]any{"action": "build"})
	// gdb_break with no debugger: effectful, audited as an error.
	s.refused("gdb_break", map[string]any{"location": "main"})
	want = append(want, auditWant{audit.ToolCall, "gdb_break", "error", map[string]any{"location": "main"}, "not running", true})
	// Refused before a handler runs: arguments the schema rejects, and a
	// tool of a higher level.
	refusedRO("pane_capture", map[string]any{"pane": shell, "level": "full"}, "")
	refusedRO("nvim_buffer_edit", map[string]any{"path": 7, "start": 1, "end": 1, "lines": []any{}}, "")
	refusedRO("nvim_command", map[string]any{"command": "!id"}, "")
	refusedRO("pane_run", map[string]any{"pane": shell, "command": "id"}, "")
	// A megabyte of tool name must not bloat (and so break) the log.
	long := strings.Repeat("n", 1<<20)
	refusedRO(long, map[string]any{}, "not a tool at level assist")
	ok("nvim_hint", map[string]any{"path": "t1/words.c", "clear": true})
	s.c.Close()
	obs.c.Close()

	// Both sessions end (the server writes session_end when its input
	// closes).
	var entries []audit.Entry
	var data []byte
	waitUntil(t, 10*time.Second, "three session_end entries", func() bool {
		entries, data = readAudit(t, in.Dirs.State)
		n := 0
		for _, e := range entries {
			if e.Event == audit.SessionEnd {
				n++
			}
		}
		return n == 3
	})
	res, err := audit.Verify(bytes.NewReader(data))
	if err != nil || !res.OK || res.Lines != len(entries) {
		t.Fatalf("the chain does not verify: %+v %v", res, err)
	}

	bySession := map[string][]audit.Entry{}
	var order []string
	for _, e := range entries {
		if _, seen := bySession[e.Session]; !seen {
			order = append(order, e.Session)
		}
		bySession[e.Session] = append(bySession[e.Session], e)
	}
	if len(order) != 3 {
		t.Fatalf("want 3 sessions in the log, got %d:\n%s", len(order), data)
	}
	for _, id := range order {
		es := bySession[id]
		first, last := es[0], es[len(es)-1]
		if first.Event != audit.SessionStart || first.Result != "ok" || last.Event != audit.SessionEnd {
			t.Fatalf("session %s does not start and end: %+v ... %+v", id, first, last)
		}
		for _, e := range es {
			if wantAgent := map[bool]string{true: "a1b2c3"}[id == order[2]]; e.Agent != wantAgent {
				t.Errorf("session %d: agent %q in %+v, want %q", slices.Index(order, id), e.Agent, e, wantAgent)
			}
			if e.Instance != in.Name || e.ContainerID != in.Record.ContainerID || e.Account == "" || e.Time.IsZero() {
				t.Errorf("entry without instance, container id, account or time: %+v", e)
			}
		}
	}
	if es := bySession[order[0]]; len(es) != 3 || es[1].Event != audit.Refused || es[1].Tool != "pane_list" || !strings.Contains(es[1].Detail, "level") {
		t.Errorf("the session with a refused first call: %+v", es)
	}
	if es := bySession[order[1]]; len(es) != 2 || es[0].Level != "observe" {
		t.Errorf("the observe session's reads were audited: %+v", es)
	}
	got := bySession[order[2]]
	got = got[1 : len(got)-1]
	for _, e := range got {
		if e.Level != "assist" {
			t.Errorf("level %q in %+v", e.Level, e)
		}
	}
	nwant := len(want)
	for _, w := range want {
		if w.intent {
			nwant++
		}
	}
	if len(got) != nwant {
		var b strings.Builder
		for _, e := range got {
			b.WriteString(e.Event + " " + e.Tool + " " + e.Result + " " + e.Detail + "\n")
		}
		t.Fatalf("assist session: %d audit entries between start and end, want %d:\n%s", len(got), nwant, b.String())
	}
	i := 0
	for _, w := range want {
		if w.intent {
			in := got[i]
			i++
			if in.Event != audit.ToolIntent || in.Tool != w.tool || in.Result != "" || in.ArgsDigest != audit.Digest(w.args) || in.Intent != 0 {
				t.Errorf("entry %d: %s %s %q, want the intent of %s", i-1, in.Event, clip(in.Tool, 100), in.Result, w.tool)
			}
			if e := got[i]; e.Intent != in.Seq || e.Duration == "" {
				t.Errorf("entry %d (%s): intent %d duration %q, want the intent %d and a duration", i, w.tool, e.Intent, e.Duration, in.Seq)
			}
		} else if got[i].Intent != 0 || got[i].Duration != "" {
			t.Errorf("entry %d (%s): names an intent (%d) or a duration (%q)", i, w.tool, got[i].Intent, got[i].Duration)
		}
		e := got[i]
		i++
		if len(w.tool) > 100 && len(e.Tool) < 100 && strings.HasPrefix(w.tool, strings.TrimSuffix(e.Tool, "…")) {
			w.tool = e.Tool
		}
		if e.Event != w.event || e.Tool != w.tool || e.Result != w.result {
			t.Errorf("entry %d: %s %s %s, want %s %s %s (%s)", i-1, e.Event, clip(e.Tool, 100), e.Result, w.event, clip(w.tool, 100), w.result, e.Detail)
		}
		if d := audit.Digest(w.args); e.ArgsDigest != d {
			t.Errorf("entry %d (%s): args digest %s, want %s", i-1, w.tool, e.ArgsDigest, d)
		}
		if w.detail != "" && !strings.Contains(e.Detail, w.detail) {
			t.Errorf("entry %d (%s): detail %q does not say %q", i-1, w.tool, e.Detail, w.detail)
		}
		if w.result == "refused" && e.Detail == "" {
			t.Errorf("entry %d (%s): a refusal without the reason", i-1, w.tool)
		}
	}
	if res.UnfinishedCount != 0 {
		t.Errorf("intents without an outcome: %+v", res.Unfinished)
	}
}

// TestAgentFlagChecked: an --agent that is not an agent id is a usage error,
// before anything is served or logged.
func TestAgentFlagChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stem-mcp; mcpcmd's TestServeChecksTheAgentFlag is the in-process twin")
	}
	for _, bad := range []string{"x;id", "../a1b2c3", "A1B2C3", "a1b2c3d", strings.Repeat("a", 200), "a1b2c3\n"} {
		cmd := exec.Command(stemMCP(t), "serve", "--level", "observe", "--agent", bad)
		cmd.Env = []string{"XDG_RUNTIME_DIR=" + t.TempDir(), "STEM_STATE_DIR=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--agent") {
			t.Errorf("--agent %q: %v, %s", bad, err, out)
		}
	}
}
