package mcpcmd

import (
	"context"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// serve refuses an --agent that is not an agent id (it goes into every
// audit entry) as a flag error before any server starts. Control: a valid
// id passes that check and the server starts (and ends on the empty
// stdin), so the refusal is the check's and not any failure's.
func TestServeChecksTheAgentFlag(t *testing.T) {
	t.Parallel()
	serve := func(agent string) error {
		ios, _, out, _ := iostreams.Test()
		rt, state := t.TempDir(), t.TempDir()
		env := map[string]string{"XDG_RUNTIME_DIR": rt, "STEM_STATE_DIR": state, "HOME": t.TempDir()}
		cmd := NewCmdRoot(ios, func(k string) string { return env[k] })
		cmd.SetArgs([]string{"serve", "--level", "observe", "--agent", agent})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if err != nil && out.Len() != 0 {
			t.Errorf("--agent %q printed %q", agent, out.String())
		}
		return err
	}
	for _, bad := range []string{"x;id", "../a1b2c3", "A1B2C3", "a1b2c3d", strings.Repeat("a", 200), "a1b2c3\n"} {
		if err := serve(bad); err == nil || !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "--agent") {
			t.Errorf("--agent %q: %v", bad, err)
		}
	}
	if err := serve("a1b2c3"); err != nil && strings.Contains(err.Error(), "--agent") {
		t.Errorf("control: a valid id refused: %v", err)
	}
}
