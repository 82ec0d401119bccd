package list_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/down"
	"github.com/stem-edu/stem/internal/cmd/list"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// TestListShowsStates: an empty registry says how to start; a running
// and then a stopped instance show as such, in the table and in --json.
func TestListShowsStates(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(list.NewCmdList(w.F, nil)); err != nil || !strings.Contains(w.ErrOut.String(), "no instances: start one with `stemctl up") {
		t.Fatalf("empty list: %v %q", err, w.ErrOut)
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(list.NewCmdList(w.F, nil)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(w.Out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "INSTANCE") || !strings.HasPrefix(lines[1], inst+"  running") || !strings.Contains(lines[1], "demo/hello t1") {
		t.Fatalf("table:\n%s", w.Out)
	}
	if err := w.Run(down.NewCmdDown(w.F, nil), inst); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(list.NewCmdList(w.F, nil), "--json"); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Record struct {
			Instance string `json:"instance"`
		} `json:"record"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(w.Out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Record.Instance != inst || rows[0].State != "stopped" {
		t.Fatalf("--json: %v %+v\n%s", err, rows, w.Out)
	}
}
