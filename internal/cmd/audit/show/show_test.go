package show_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmd/audit/show"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// TestShowEventFilter: every event the log writes is accepted; a name
// that is none is a usage error listing them, not an empty table.
func TestShowEventFilter(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	for _, e := range audit.Events() {
		if err := w.Run(show.NewCmdShow(w.F, nil), "--event", e); err != nil {
			t.Errorf("--event %s: %v", e, err)
		}
	}
	err := w.Run(show.NewCmdShow(w.F, nil), "--event", "bogus")
	if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "proposal_decision") {
		t.Fatalf("--event bogus: %v", err)
	}
}
