package rm_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/rm"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
	"github.com/stem-edu/stem/internal/registry"
)

const inst = "native-amd64-demo-hello-t1"

// TestRmRemovesAndReportsEach: rm removes the container and the record;
// an unknown instance among the arguments is reported, the others still
// go, and the exit code says something failed.
func TestRmRemovesAndReportsEach(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	reg, _ := w.F.Registry()
	rec, _ := reg.Get(t.Context(), inst)
	err := w.Run(rm.NewCmdRm(w.F, nil), "native-amd64-demo-hello-t9", inst, "--json")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("rm with an unknown instance: %v", err)
	}
	var res []struct {
		Instance string `json:"instance"`
		Removed  bool   `json:"removed"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal(w.Out.Bytes(), &res); err != nil || len(res) != 2 {
		t.Fatalf("--json: %v\n%s", err, w.Out)
	}
	if res[0].Removed || !strings.Contains(res[0].Error, "no such instance") || !res[1].Removed {
		t.Fatalf("results: %+v", res)
	}
	if _, err := reg.Get(t.Context(), inst); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the record is still there: %v", err)
	}
	if _, err := w.Engine.Inspect(t.Context(), rec.ContainerID); err == nil {
		t.Fatal("the container is still there")
	}
	// Without --json the failure is a line on stderr.
	if err := w.Run(rm.NewCmdRm(w.F, nil), inst); err == nil || !strings.Contains(w.ErrOut.String(), "stemctl: "+inst+": no such instance") {
		t.Fatalf("rm again: %v %s", err, w.ErrOut)
	}
}
