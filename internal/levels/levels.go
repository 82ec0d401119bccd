// Package levels names stem-mcp's access levels and the tools each one
// has, as data. stemctl needs them (agent context, flags) without linking
// the MCP server, whose dependencies cost every stemctl start ~6 ms of
// package initialisation; mcpserver's tests hold its definitions to this
// table.
package levels

import "fmt"

// Level is an access level. It is fixed when the process starts (by the SSH
// forced command or the local configuration) and never taken from anything
// an MCP client sends.
type Level int

const (
	Observe Level = iota + 1
	Assist
	Full
)

// names is each level's name, the one spelling of it: flags, grants,
// stem.toml, the gate's status and the audit log all use these.
var names = [...]string{Observe: "observe", Assist: "assist", Full: "full"}

func (l Level) String() string {
	if l >= Observe && l <= Full {
		return names[l]
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// Names lists the level names, lowest first (for completions and help).
func Names() []string { return []string{Observe.String(), Assist.String(), Full.String()} }

// Parse reads observe, assist or full.
func Parse(s string) (Level, error) {
	for l := Observe; l <= Full; l++ {
		if s == names[l] {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown level %q: choose observe, assist or full", s)
}

// Tool is one definition: the levels from Min to Max (0: no upper bound)
// have it. A tool that behaves differently per level appears once per
// range, lowest first. This table is the one statement of which level has
// which tool: the server takes its definitions' ranges and order from it.
type Tool struct {
	Name     string
	Min, Max Level
}

var tools = []Tool{
	{"session_status", Observe, 0},
	{"task_info", Observe, 0},
	{"pane_list", Observe, 0},
	{"pane_capture", Observe, 0},
	{"pane_wait", Observe, 0},
	{"nvim_status", Observe, 0},
	{"nvim_buffer_read", Observe, 0},
	{"nvim_diagnostics", Observe, 0},
	{"file_blame", Observe, 0},
	{"gdb_status", Observe, 0},
	{"session_events", Observe, 0},

	{"nvim_open", Assist, 0},
	{"nvim_buffer_edit", Assist, 0},
	{"nvim_hint", Assist, 0},
	{"proposal_status", Assist, 0},
	{"pane_send_keys", Assist, Assist}, // full's sends any key
	{"gdb_break", Assist, 0},
	{"gdb_continue", Assist, 0},
	{"gdb_step", Assist, 0},
	{"gdb_next", Assist, 0},
	{"gdb_finish", Assist, 0},
	{"gdb_interrupt", Assist, 0},
	{"gdb_frame", Assist, 0},
	{"gdb_print", Assist, 0},
	{"task_action", Assist, 0},

	{"nvim_command", Full, 0},
	{"nvim_lua", Full, 0},
	{"pane_send_keys", Full, 0},
	{"pane_run", Full, 0},
	{"gdb_command", Full, 0},
}

// gateTools are the tools a session has only when the SSH gate serves it:
// the gate's own verbs, offered as tools of that session. They are not in
// Tools or ToolNames, which list what any server at a level offers (a
// forwarder such as the teacher's class server has no gate behind it).
var gateTools = []Tool{
	{"gate_status", Observe, 0}, // every grant has the status verb
}

// GateTools returns the gate-only tools with their ranges.
func GateTools() []Tool { return append([]Tool(nil), gateTools...) }

// Tools returns the table, in the server's registration order.
func Tools() []Tool { return append([]Tool(nil), tools...) }

// ToolNames lists the tools a server at l offers, in registration order.
func ToolNames(l Level) []string {
	var names []string
	for _, t := range tools {
		if l >= t.Min && (t.Max == 0 || l <= t.Max) {
			names = append(names, t.Name)
		}
	}
	return names
}

// Has reports whether a server at l offers the tool name (under any of its
// definitions).
func Has(name string, l Level) bool {
	for _, t := range tools {
		if t.Name == name && l >= t.Min && (t.Max == 0 || l <= t.Max) {
			return true
		}
	}
	return false
}

// Known reports whether name is a tool of some level.
func Known(name string) bool { return Has(name, Full) }
