package agent

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
)

// The launcher and the supervisor each link package runspec and not each
// other: `stemctl agent start` does not carry the supervisor's runtime,
// and `stemctl agent run` does not carry the launcher.
func TestLauncherAndSupervisorDoNotLinkEachOther(t *testing.T) {
	t.Parallel()
	const mod = "github.com/stem-edu/stem/internal/agent"
	deps := func(pkg string) []string {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct{ pkg, not string }{
		{mod, mod + "/supervisor"},
		{mod + "/supervisor", mod},
	} {
		d := deps(c.pkg)
		if !slices.Contains(d, mod+"/runspec") {
			t.Errorf("%s does not link %s/runspec", c.pkg, mod)
		}
		if slices.Contains(d, c.not) {
			t.Errorf("%s links %s", c.pkg, c.not)
		}
	}
}
