package debug_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv"
)

// TestLuaMI runs the editor plugin's MI parser checks (testdata/mi_spec.lua)
// in a headless Neovim of the images' version, with the plugin's files on
// the runtimepath as the images install them.
func TestLuaMI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Neovim (skipped with -short)")
	}
	testenv.Require(t, "nvim")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rtp := filepath.Join(testenv.RepoRoot(), "containers", "files", "nvim")
	cmd := exec.CommandContext(ctx, "nvim", "--headless", "-u", "NONE", "-i", "NONE", "--noplugin",
		"--cmd", "set rtp^="+rtp, "-c", "luafile testdata/mi_spec.lua")
	out, err := cmd.CombinedOutput()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("mi_spec.lua: %v\n%s", err, out)
	}
}
