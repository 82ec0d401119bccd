package mcpserver_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/testenv"
)

// The exact tool list of each level, written out by hand so that adding a
// tool to a level is a deliberate change to this test.
var wantTools = map[string][]string{
	"observe": {"file_blame", "gdb_status", "nvim_buffer_read", "nvim_diagnostics", "nvim_status", "pane_capture", "pane_list", "pane_wait",
		"session_events", "session_status", "task_info"},
	"assist": {"file_blame", "gdb_break", "gdb_continue", "gdb_finish", "gdb_frame", "gdb_interrupt", "gdb_next", "gdb_print", "gdb_status", "gdb_step",
		"nvim_buffer_edit", "nvim_buffer_read", "nvim_diagnostics", "nvim_hint", "nvim_open", "nvim_status",
		"pane_capture", "pane_list", "pane_send_keys", "pane_wait", "proposal_status", "session_events", "session_status", "task_action", "task_info"},
	"full": {"file_blame", "gdb_break", "gdb_command", "gdb_continue", "gdb_finish", "gdb_frame", "gdb_interrupt", "gdb_next", "gdb_print", "gdb_status", "gdb_step",
		"nvim_buffer_edit", "nvim_buffer_read", "nvim_command", "nvim_diagnostics", "nvim_hint", "nvim_lua", "nvim_open", "nvim_status",
		"pane_capture", "pane_list", "pane_run", "pane_send_keys", "pane_wait", "proposal_status", "session_events", "session_status", "task_action", "task_info"},
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
			l, _ := levels.Parse(level)
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

// wantHints is every tool's MCP annotations as the code intends them:
// readOnly tools only read the session; the others change it, and are
// destructive when what they do cannot be taken back by the student (keys
// typed into a shell, a buffer's lines replaced, free Ex, Lua, gdb or shell
// text). A tool without a row here fails TestToolAnnotations.
var wantHints = map[string]struct{ readOnly, destructive bool }{
	"session_status":   {true, false},
	"task_info":        {true, false},
	"session_events":   {true, false},
	"pane_list":        {true, false},
	"pane_capture":     {true, false},
	"pane_wait":        {true, false},
	"nvim_status":      {true, false},
	"nvim_buffer_read": {true, false},
	"nvim_diagnostics": {true, false},
	"file_blame":       {true, false},
	"gdb_status":       {true, false},
	"gdb_print":        {true, false},
	"nvim_open":        {false, false},
	"nvim_hint":        {false, false},
	"nvim_buffer_edit": {false, true},
	"proposal_status":  {true, false},
	"task_action":      {false, false},
	"pane_send_keys":   {false, true},
	"gdb_break":        {false, false},
	"gdb_continue":     {false, false},
	"gdb_step":         {false, false},
	"gdb_next":         {false, false},
	"gdb_finish":       {false, false},
	"gdb_interrupt":    {false, false},
	"gdb_frame":        {false, false},
	"pane_run":         {false, true},
	"nvim_command":     {false, true},
	"nvim_lua":         {false, true},
	"gdb_command":      {false, true},
}

// TestToolAnnotations checks readOnlyHint and destructiveHint of every tool
// as tools/list reports them, at each level (pane_send_keys is defined once
// per level range), and that the table covers exactly the listed tools.
func TestToolAnnotations(t *testing.T) {
	in := testenv.New(t, testenv.Options{})
	in.Select(t)
	listed := map[string]bool{}
	for _, level := range []string{"observe", "assist", "full"} {
		s := connect(t, in, level)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			listed[tl.Name] = true
			want, ok := wantHints[tl.Name]
			if !ok {
				t.Errorf("%s: tool %s has no row in wantHints: decide its readOnlyHint and destructiveHint", level, tl.Name)
				continue
			}
			a := tl.Annotations
			if a.ReadOnlyHint == nil || a.DestructiveHint == nil {
				t.Errorf("%s: %s lacks readOnlyHint or destructiveHint: %+v", level, tl.Name, a)
				continue
			}
			if *a.ReadOnlyHint != want.readOnly || *a.DestructiveHint != want.destructive {
				t.Errorf("%s: %s has readOnlyHint=%v destructiveHint=%v, want %v %v",
					level, tl.Name, *a.ReadOnlyHint, *a.DestructiveHint, want.readOnly, want.destructive)
			}
			if *a.ReadOnlyHint && *a.DestructiveHint {
				t.Errorf("%s: %s is both read-only and destructive", level, tl.Name)
			}
		}
	}
	for name := range wantHints {
		if !listed[name] {
			t.Errorf("wantHints has a row for %s, which no level lists", name)
		}
	}
}
