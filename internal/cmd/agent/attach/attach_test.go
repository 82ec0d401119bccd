package attach_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/cmd/agent/attach"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// attach never starts an instance: an unknown one and a stopped one are
// refused, each naming the `agent start` line that would start it with
// the agent (the stopped one with its own task), and the stopped
// container stays stopped.
func TestAttachNeedsARunningInstance(t *testing.T) {
	w := cmdtest.New(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test") // past the key check, which comes first
	err := w.Run(attach.NewCmdAttach(w.F, nil), "claude", "--instance", inst)
	if err == nil || !strings.Contains(err.Error(), "stemctl agent start claude PROFILE SERIES CARD TASK") {
		t.Fatalf("unknown instance: %v", err)
	}
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	reg, _ := w.F.Registry()
	rec, err := reg.Get(t.Context(), inst)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Engine.Stop(t.Context(), rec.ContainerID, time.Second); err != nil {
		t.Fatal(err)
	}
	err = w.Run(attach.NewCmdAttach(w.F, nil), "claude", "--instance", inst)
	if err == nil || !strings.Contains(err.Error(), "stemctl agent start claude native-amd64 demo hello 1") {
		t.Fatalf("stopped instance: %v", err)
	}
	if c, err := w.Engine.Inspect(t.Context(), rec.ContainerID); err != nil || c.Running {
		t.Fatalf("attach started the instance: %v %+v", err, c)
	}
}
