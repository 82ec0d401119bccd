package mcpserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/mcpserver/mcptest"
)

// Without a debugger gdb_status answers so (not an error) and the tools
// that need one fail with part_down; once it runs they reach it.
func TestInProcessGDBDownThenUp(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	r := h.Call("gdb_status", nil)
	if r.IsError || r.Fields["state"] != "no-debugger" {
		t.Fatalf("gdb_status without a debugger: %+v", r)
	}
	r = h.Call("gdb_break", map[string]any{"location": "words.c:10"})
	if r.Code != errcode.PartDown || !strings.Contains(r.Text, "debugger is not running") {
		t.Fatalf("gdb_break without a debugger: %+v", r)
	}
	h.GDB.Start()
	if r := h.Call("gdb_break", map[string]any{"location": "words.c:10"}); r.IsError {
		t.Fatalf("gdb_break: %s", r.Text)
	}
	if got := h.GDB.Sent(); len(got) != 1 || !strings.HasPrefix(got[0], "-break-insert") || !strings.Contains(got[0], "words.c:10") {
		t.Fatalf("gdb got %q", got)
	}
	r = h.Call("gdb_status", nil)
	st, _ := r.Fields["status"].(map[string]any)
	if r.IsError || st["state"] != "stopped" {
		t.Fatalf("gdb_status with a debugger: %+v", r)
	}
	h.GDB.Stop()
	if r := h.Call("gdb_next", nil); r.Code != errcode.PartDown {
		t.Fatalf("gdb_next after the debugger quit: %+v", r)
	}
}

// Run control waits for the stop every client sees and returns it.
func TestInProcessGDBRunControl(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	h.GDB.Start()
	r := h.Call("gdb_next", map[string]any{"wait_ms": 5000})
	ev, _ := r.Fields["event"].(map[string]any)
	if r.IsError || ev["kind"] != "stopped" {
		t.Fatalf("gdb_next: %+v", r)
	}
	if got := h.GDB.Sent(); !slices.Contains(got, "-exec-next") {
		t.Fatalf("gdb got %q", got)
	}
	// gdb's "not being run" is said plainly, with its own code.
	h.GDB.ExecFunc = func(cmd gdbmi.Command) (gdbmi.Result, error) {
		return gdbmi.Result{}, &gdbmi.CommandError{Command: cmd.String(), Msg: "The program is not being run."}
	}
	if r := h.Call("gdb_continue", map[string]any{"wait_ms": 0}); r.Code != errcode.NoProgram {
		t.Fatalf("gdb_continue with no program: %+v", r)
	}
}

// gdb_print takes expressions without side effects only: an assignment
// or a call is refused before gdb sees anything. Control: a plain read
// reaches gdb.
func TestInProcessGDBPrintIsReadOnly(t *testing.T) {
	t.Parallel()
	h := mcptest.New(t, mcptest.Options{Level: mcpserver.Assist})
	h.GDB.Start()
	for _, e := range []string{"x = 1", "abort()", "x++", "$pc = 0"} {
		if r := h.Call("gdb_print", map[string]any{"expression": e}); r.Code != errcode.BadInput {
			t.Errorf("gdb_print %q: %+v", e, r)
		}
	}
	if got := h.GDB.Sent(); len(got) != 0 {
		t.Fatalf("refused expressions reached gdb: %q", got)
	}
	if r := h.Call("gdb_print", map[string]any{"expression": "words[1]"}); r.IsError {
		t.Fatalf("control: gdb_print words[1]: %s", r.Text)
	}
	if got := h.GDB.Sent(); len(got) != 1 || !strings.Contains(got[0], "may-call-functions off") || !strings.Contains(got[0], "output words [ 1 ]") {
		t.Fatalf("gdb got %q", got)
	}
}
