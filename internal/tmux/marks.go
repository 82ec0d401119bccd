package tmux

import (
	"strconv"
	"strings"
)

// Marks follows one pane's output stream (Notification.Data of "output"
// notifications, in order) and reports commands that finished there, from
// the shell integration's OSC 133 marks: a C (a command line was accepted)
// followed by a D;STATUS. A D without a C before it (an empty command line,
// the first prompt) is not a command.
type Marks struct {
	sc      oscScanner
	running bool
}

// Feed scans p and returns the exit statuses of commands that finished in
// it, in order.
func (m *Marks) Feed(p []byte) []int {
	var out []int
	for _, b := range p {
		osc, ok := m.sc.step(b)
		if !ok {
			continue
		}
		switch {
		case osc == "133;C":
			m.running = true
		case strings.HasPrefix(osc, "133;D;"):
			if m.running {
				if n, err := strconv.Atoi(osc[len("133;D;"):]); err == nil {
					out = append(out, n)
				}
			}
			m.running = false
		}
	}
	return out
}

// Running reports whether a command line was accepted and has not finished.
func (m *Marks) Running() bool { return m.running }
