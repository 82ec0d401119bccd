package up_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// TestUpCreatesThenReuses: the first up creates (progress on stderr, the
// summary on stdout), the second reuses the same container; --json gives
// the record and the action.
func TestUpCreatesThenReuses(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	if out := w.Out.String(); !strings.HasPrefix(out, inst+": created in ") || !strings.Contains(out, "attach     stemctl attach "+inst) {
		t.Fatalf("first up printed:\n%s", out)
	}
	if e := w.ErrOut.String(); !strings.Contains(e, "creating "+inst) || !strings.Contains(e, "starting "+inst) {
		t.Fatalf("first up's progress:\n%s", e)
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1", "--json"); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Action string `json:"action"`
		Record struct {
			Instance    string `json:"instance"`
			ContainerID string `json:"container_id"`
		} `json:"record"`
	}
	if err := json.Unmarshal(w.Out.Bytes(), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, w.Out)
	}
	if res.Action != "reused" || res.Record.Instance != inst || w.Engine.Creates != 1 {
		t.Fatalf("second up: %+v after %d creates", res, w.Engine.Creates)
	}
}

// TestUpExplainsBadArguments: a misspelt card gets a suggestion, a
// wrong count of arguments a usage error; neither makes a container.
func TestUpExplainsBadArguments(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "helo", "1")
	if err == nil || !strings.Contains(err.Error(), `did you mean "hello"`) {
		t.Fatalf("misspelt card: %v", err)
	}
	err = w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo")
	if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "PROFILE SERIES CARD TASK") {
		t.Fatalf("two arguments: %v", err)
	}
	if w.Engine.Creates != 0 {
		t.Fatalf("%d containers made", w.Engine.Creates)
	}
}
