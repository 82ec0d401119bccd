package mcpserver

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

func (l Level) String() string {
	switch l {
	case Observe:
		return "observe"
	case Assist:
		return "assist"
	case Full:
		return "full"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// ParseLevel reads observe, assist or full.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "observe":
		return Observe, nil
	case "assist":
		return Assist, nil
	case "full":
		return Full, nil
	}
	return 0, fmt.Errorf("unknown level %q: choose observe, assist or full", s)
}
