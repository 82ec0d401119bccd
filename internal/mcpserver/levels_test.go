package mcpserver_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/testenv"
)

// The exact tool list of each level, written out by hand so that adding a
// tool to a level is a deliberate change to this test.
var wantTools = map[string][]string{
	"observe": {"gdb_status", "nvim_buffer_read", "nvim_diagnostics", "nvim_status", "pane_capture", "pane_list", "pane_wait",
		"session_events", "session_status", "task_info"},
	"assist": {"gdb_break", "gdb_continue", "gdb_finish", "gdb_frame", "gdb_interrupt", "gdb_next", "gdb_print", "gdb_status", "gdb_step",
		"nvim_buffer_edit", "nvim_buffer_read", "nvim_diagnostics", "nvim_hint", "nvim_open", "nvim_status",
		"pane_capture", "pane_list", "pane_send_keys", "pane_wait", "session_events", "session_status", "task_action", "task_info"},
	"full": {"gdb_break", "gdb_command", "gdb_continue", "gdb_finish", "gdb_frame", "gdb_interrupt", "gdb_next", "gdb_print", "gdb_status", "gdb_step",
		"nvim_buffer_edit", "nvim_buffer_read", "nvim_command", "nvim_diagnostics", "nvim_hint", "nvim_lua", "nvim_open", "nvim_status",
		"pane_capture", "pane_list", "pane_run", "pane_send_keys", "pane_wait", "session_events", "session_status", "task_action", "task_info"},
}

// freeText lists the tools that take free-form Ex, Lua, gdb or shell text:
// they must exist only at full.
var freeText = []string{"nvim_command", "nvim_lua", "gdb_command", "pane_run"}

func TestToolListsPerLevel(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	for _, level := range []string{"observe", "assist", "full"} {
		t.Run(level, func(t *testing.T) {
			s := connect(t, in, level)
			got := s.tools()
			sort.Strings(got)
			if !reflect.DeepEqual(got, wantTools[level]) {
				t.Fatalf("tools at %s:\n got %v\nwant %v", level, got, wantTools[level])
			}
			l, _ := mcpserver.ParseLevel(level)
			names := mcpserver.ToolNames(l)
			sort.Strings(names)
			if !reflect.DeepEqual(names, got) {
				t.Fatalf("ToolNames(%s) %v differs from what the server lists %v", level, names, got)
			}
			if level != "full" {
				for _, ft := range freeText {
					for _, n := range got {
						if n == ft {
							t.Fatalf("%s exposes free-text tool %s", level, ft)
						}
					}
				}
			}
		})
	}
}

// TestHigherLevelToolsDoNotExist calls every tool of a higher level on a
// lower-level server: each must fail as an unknown tool, and nothing may be
// done (the canary stays absent, the buffer unchanged).
func TestHigherLevelToolsDoNotExist(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	have := map[string]map[string]bool{}
	for l, names := range wantTools {
		have[l] = map[string]bool{}
		for _, n := range names {
			have[l][n] = true
		}
	}
	canary := in.Resolved.CardPath + "/CANARY"
	hostile := map[string]any{
		"command": "!touch " + canary, "code": "os.execute('touch " + canary + "')", "pane": "%0", "keys": "touch " + canary + "{Enter}",
		"path": "t1/hello.c", "start": 1, "end": 1, "lines": []any{"x"}, "location": "main", "expression": "1", "frame": 0, "action": "build", "line": 1, "text": "x",
	}
	for _, pair := range [][2]string{{"observe", "assist"}, {"observe", "full"}, {"assist", "full"}} {
		low, high := pair[0], pair[1]
		s := connect(t, in, low)
		for _, name := range wantTools[high] {
			if have[low][name] {
				continue
			}
			msg := s.refused(name, hostile)
			if !strings.Contains(strings.ToLower(msg), "not found") && !strings.Contains(strings.ToLower(msg), "unknown") {
				t.Errorf("%s server, %s: refusal does not say the tool is unknown: %s", low, name, msg)
			}
		}
	}
	if _, err := osStat(canary); err == nil {
		t.Fatal("a higher-level tool ran on a lower-level server: canary created")
	}
}
