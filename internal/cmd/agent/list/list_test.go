package list_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/agent/list"
	"github.com/stem-edu/stem/internal/cmd/agent/stop"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// TestNoAgents: list says how to start one; stop refuses what is not an
// agent id and says where ids come from.
func TestNoAgents(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(list.NewCmdList(w.F, nil)); err != nil || !strings.Contains(w.ErrOut.String(), "no agents are running (start one: stemctl agent start PROVIDER") {
		t.Fatalf("list: %v %q", err, w.ErrOut)
	}
	if err := w.Run(stop.NewCmdStop(w.F, nil), "nope"); err == nil || !strings.Contains(err.Error(), "is not an agent id") || !strings.Contains(err.Error(), "stemctl agent list") {
		t.Fatalf("stop nope: %v", err)
	}
}
