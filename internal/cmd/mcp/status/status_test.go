package mcpstatus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	mcpselect "github.com/stem-edu/stem/internal/cmd/mcp/select"
	mcpstatus "github.com/stem-edu/stem/internal/cmd/mcp/status"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

func status(t *testing.T, w *cmdtest.World) (mcpstatus.Result, error) {
	t.Helper()
	err := w.Run(mcpstatus.NewCmdStatus(w.F, nil), "--json")
	var res mcpstatus.Result
	if jerr := json.Unmarshal(w.Out.Bytes(), &res); jerr != nil {
		t.Fatalf("--json: %v\n%s", jerr, w.Out)
	}
	return res, err
}

func exit3(err error) bool {
	var ee *cmdutil.ExitError
	return errors.As(err, &ee) && ee.Code == 3
}

// status --json: nothing selected is exit 3 with selected false; a
// selected healthy instance is exit 0 with its full container id; once
// its container stops, the same selection is exit 3 naming the check that
// failed, and the table says what the problem is.
func TestStatusJSONFollowsTheSelection(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	res, err := status(t, w)
	if !exit3(err) || res.Selected || res.OK || res.Error == "" || res.Link == "" {
		t.Fatalf("nothing selected: %v %+v", err, res)
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(mcpselect.NewCmdSelect(w.F, nil), inst); err != nil {
		t.Fatal(err)
	}
	res, err = status(t, w)
	if err != nil || !res.Selected || !res.OK || res.Instance != inst || len(res.ContainerID) != 64 || res.Check != "" || res.Error != "" {
		t.Fatalf("healthy: %v %+v", err, res)
	}
	if err := w.Engine.Stop(t.Context(), res.ContainerID, time.Second); err != nil {
		t.Fatal(err)
	}
	res, err = status(t, w)
	if !exit3(err) || !res.Selected || res.OK || res.Check == "" || res.Error == "" {
		t.Fatalf("stopped container: %v %+v", err, res)
	}
	err = w.Run(mcpstatus.NewCmdStatus(w.F, nil))
	if !exit3(err) || !strings.Contains(w.Out.String(), "problem    ") {
		t.Fatalf("table for a stopped container: %v\n%s", err, w.Out)
	}
	if err := w.Run(mcpstatus.NewCmdStatus(w.F, nil), "extra"); err == nil || exit3(err) {
		t.Fatalf("an argument: %v", err)
	}
}
