package tmuxtest_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func TestStart(t *testing.T) {
	s := tmuxtest.Start(t)
	if len(s.Socket) >= 100 {
		t.Fatalf("socket path %d bytes", len(s.Socket))
	}
	if got := strings.TrimSpace(s.Tmux(t, "display-message", "-p", "-t", "%0", "#{session_name} #{pane_current_command}")); got != "stem bash" {
		t.Fatalf("session/shell = %q", got)
	}
	// The integration is loaded in the shell.
	c := s.Dial(t)
	out, code, err := c.Run(t.Context(), "%0", "declare -F __stem_probe")
	if err != nil || code != 0 || out != "__stem_probe\n" {
		t.Fatalf("integration: %q %d %v", out, code, err)
	}
}
