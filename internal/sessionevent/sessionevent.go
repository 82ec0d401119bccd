// Package sessionevent is the session event as stem-mcp sends it (in
// session_events and as MCP logging notifications, logger "stem.events"):
// a contract between the server and its readers (an agent's supervisor,
// the teacher's class hub), kept apart so the readers decode it without
// linking the server.
package sessionevent

import "time"

// Event types.
const (
	GDBStopped     = "gdb_stopped" // the debugger stopped (breakpoint, step, signal)
	GDBExited      = "gdb_program_exited"
	ProgramExited  = "program_exited"  // a command in a pane finished
	ProgramCrashed = "program_crashed" // ... killed by a signal such as SIGSEGV
	BuildFailed    = "build_failed"    // the task's build command failed (task_action, or typed in any pane)
	TestFailed     = "test_failed"
)

// Event is one session event.
type Event struct {
	Seq      int64          `json:"seq"`
	Type     string         `json:"type"`
	Time     time.Time      `json:"time"`
	Instance string         `json:"instance"`
	Pane     string         `json:"pane,omitempty"`
	Role     string         `json:"role,omitempty"`
	Action   string         `json:"action,omitempty"`
	ExitCode *int           `json:"exit_code,omitempty"`
	Signal   string         `json:"signal,omitempty"`
	GDB      map[string]any `json:"gdb,omitempty"`
}
