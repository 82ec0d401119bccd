package mcpserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/tmux"
)

// TestTmuxEndedDuringACall: a call whose tmux connection closed under it
// (the container stopped) is the tmux part down, with the command that
// starts it again, not the client library's words.
func TestTmuxEndedDuringACall(t *testing.T) {
	t.Parallel()
	rec := registry.Record{Instance: "i1", Profile: "native-amd64", Series: "demo", Card: "hello", Task: "1"}
	pd := partOf(rec, fmt.Errorf("pane_wait: %w", tmux.ErrClosed))
	if pd == nil || pd.part != partTmux || pd.state != partDown || !strings.Contains(pd.Error(), "`stemctl up native-amd64 demo hello 1` starts it again") {
		t.Fatalf("partOf: %+v", pd)
	}
	if partOf(rec, fmt.Errorf("some other failure")) != nil {
		t.Fatal("an unrelated error is a part down")
	}
}
