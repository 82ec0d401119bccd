package agentcli

import (
	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/levels"
)

// ownEditsOff reports whether the CLI's own tools (file edits, shell) must
// not change files: at observe, and whenever the task's policy keeps
// agents from editing directly or caps them below assist. Its edits to
// the card then go through stem, whose server holds the policy.
func (s Session) ownEditsOff() bool {
	if s.Level == levels.Observe.String() {
		return true
	}
	if s.Policy == nil {
		return false
	}
	l, err := levels.Parse(s.Level)
	if err != nil {
		return true
	}
	eff, ok := s.Policy.Effective(l)
	return !ok || eff < levels.Assist || s.Policy.Edits != agentpolicy.EditsDirect
}

// Each CLI's own tools that write files or run commands, which ownEditsOff
// turns off where the CLI has no read-only mode that keeps MCP tools.
var (
	claudeWriteTools = []string{"Bash", "Edit", "MultiEdit", "Write", "NotebookEdit"}
	geminiWriteTools = []string{"run_shell_command", "write_file", "replace"}
)

// WriteTools lists the CLI's own tools that ownEditsOff turns off for the
// adapter (nil for a CLI with a read-only mode instead, or none).
func WriteTools(adapter string) []string {
	switch adapter {
	case AdapterClaude:
		return append([]string(nil), claudeWriteTools...)
	case AdapterGemini:
		return append([]string(nil), geminiWriteTools...)
	}
	return nil
}
