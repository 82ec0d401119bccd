package start_test

import (
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/agent/start"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// What agent start refuses, it refuses before any instance is made: an
// unknown provider, a level that does not exist, a built-in CLI with no
// API key for its sandbox. Each error names the fix. Control: with a key
// set, the same start gets as far as making the instance.
func TestStartRefusesBeforeAnyContainer(t *testing.T) {
	task := []string{"native-amd64", "demo", "hello", "1"}
	// The agent's environment is the process's (agentutil.NewEnv), not
	// the Factory's: clear the keys a developer may have set.
	for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} {
		t.Setenv(k, "")
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{append([]string{"nosuch"}, task...), []string{"nosuch", "codex"}},
		{append(append([]string{"codex"}, task...), "--level", "admin"), []string{`unknown level "admin"`, "observe, assist or full"}},
		{append([]string{"claude"}, task...), []string{"ANTHROPIC_API_KEY", "console.anthropic.com"}},
	} {
		w := cmdtest.New(t)
		err := w.Run(start.NewCmdStart(w.F, nil), c.args...)
		if err == nil {
			t.Fatalf("%v: started", c.args)
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %v\nlacks %q", c.args, err, want)
			}
		}
		if cs, _ := w.Engine.List(t.Context(), nil); len(cs) != 0 {
			t.Errorf("%v: %d containers made before the refusal", c.args, len(cs))
		}
	}
	w := cmdtest.New(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	w.Run(start.NewCmdStart(w.F, nil), append([]string{"claude"}, task...)...)
	if cs, _ := w.Engine.List(t.Context(), nil); len(cs) != 1 {
		t.Fatalf("control: with a key, %d containers made, want the instance", len(cs))
	}
}
