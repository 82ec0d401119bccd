package mcplist_test

import (
	"encoding/json"
	"strings"
	"testing"

	mcplist "github.com/stem-edu/stem/internal/cmd/mcp/list"
	mcpselect "github.com/stem-edu/stem/internal/cmd/mcp/select"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

type row struct {
	Instance    string `json:"instance"`
	ContainerID string `json:"container_id"`
	SocketDir   string `json:"socket_dir"`
	Selected    bool   `json:"selected"`
}

func rows(t *testing.T, w *cmdtest.World) []row {
	t.Helper()
	if err := w.Run(mcplist.NewCmdList(w.F, nil), "--json"); err != nil {
		t.Fatal(err)
	}
	var rs []row
	if err := json.Unmarshal(w.Out.Bytes(), &rs); err != nil {
		t.Fatalf("--json: %v\n%s", err, w.Out)
	}
	return rs
}

// An empty registry: the table says how to start an instance (on stderr,
// so a script reading stdout sees nothing) and --json is an empty list,
// never null. A registered instance is listed unselected until
// `mcp select` picks it, with its full container id in --json.
func TestListEmptyThenSelected(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(mcplist.NewCmdList(w.F, nil)); err != nil || w.Out.Len() != 0 || !strings.Contains(w.ErrOut.String(), "start one with `stemctl up`") {
		t.Fatalf("empty list: %v out %q err %q", err, w.Out, w.ErrOut)
	}
	if err := w.Run(mcplist.NewCmdList(w.F, nil), "--json"); err != nil || strings.TrimSpace(w.Out.String()) != "[]" {
		t.Fatalf("empty --json: %v %q", err, w.Out)
	}
	if err := w.Run(mcplist.NewCmdList(w.F, nil), "extra"); err == nil {
		t.Fatal("an argument was accepted")
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	rs := rows(t, w)
	if len(rs) != 1 || rs[0].Instance != inst || len(rs[0].ContainerID) != 64 || rs[0].SocketDir == "" || rs[0].Selected {
		t.Fatalf("before select: %+v", rs)
	}
	if err := w.Run(mcplist.NewCmdList(w.F, nil)); err != nil || !strings.HasPrefix(w.Out.String(), "SELECTED  INSTANCE") ||
		!strings.Contains(w.Out.String(), inst+"  "+rs[0].ContainerID[:12]+"  ") || strings.Contains(w.Out.String(), "*") {
		t.Fatalf("table before select: %v\n%s", err, w.Out)
	}
	if err := w.Run(mcpselect.NewCmdSelect(w.F, nil), inst); err != nil {
		t.Fatal(err)
	}
	if rs := rows(t, w); len(rs) != 1 || !rs[0].Selected {
		t.Fatalf("after select: %+v", rs)
	}
}
