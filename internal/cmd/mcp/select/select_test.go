package mcpselect_test

import (
	"errors"
	"strings"
	"testing"

	mcplist "github.com/stem-edu/stem/internal/cmd/mcp/list"
	mcpselect "github.com/stem-edu/stem/internal/cmd/mcp/select"
	mcpstatus "github.com/stem-edu/stem/internal/cmd/mcp/status"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// TestSelectListStatus: before anything is selected status exits 3 and
// says what to run; select refuses an unknown instance, then selects a
// running one, which list stars and status reports healthy.
func TestSelectListStatus(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	err := w.Run(mcpstatus.NewCmdStatus(w.F, nil))
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(w.Out.String(), "run `stemctl mcp select INSTANCE`") {
		t.Fatalf("status with nothing selected: %v %q", err, w.Out)
	}
	if err := w.Run(mcpselect.NewCmdSelect(w.F, nil), inst); err == nil || !strings.Contains(err.Error(), "not selected") || !strings.Contains(err.Error(), "stemctl up") {
		t.Fatalf("select of an unknown instance: %v", err)
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(mcpselect.NewCmdSelect(w.F, nil), inst); err != nil || !strings.HasPrefix(w.Out.String(), "selected "+inst) {
		t.Fatalf("select: %v %q", err, w.Out)
	}
	if err := w.Run(mcplist.NewCmdList(w.F, nil)); err != nil || !strings.Contains(w.Out.String(), "*         "+inst) {
		t.Fatalf("list: %v\n%s", err, w.Out)
	}
	if err := w.Run(mcpstatus.NewCmdStatus(w.F, nil)); err != nil || !strings.Contains(w.Out.String(), "selected   "+inst) || !strings.Contains(w.Out.String(), "health     tmux and nvim answer") {
		t.Fatalf("status: %v\n%s", err, w.Out)
	}
}
