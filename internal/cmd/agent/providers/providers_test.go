package providers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmd/agent/providers"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

// TestProvidersRunInTheSandboxImage: the built-in CLIs are reported as
// in the sandbox image (not missing from PATH), and custom as missing
// until agents.toml names a command.
func TestProvidersRunInTheSandboxImage(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(providers.NewCmdProviders(w.F, nil), "--json"); err != nil {
		t.Fatal(err)
	}
	var ps []struct {
		Name    string `json:"name"`
		Sandbox string `json:"sandbox"`
		Missing string `json:"missing"`
	}
	if err := json.Unmarshal(w.Out.Bytes(), &ps); err != nil {
		t.Fatalf("--json: %v\n%s", err, w.Out)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Name] = p.Sandbox + "|" + p.Missing
	}
	for _, n := range []string{"codex", "claude", "gemini"} {
		if !strings.HasPrefix(got[n], "in the sandbox image ") || !strings.HasSuffix(got[n], "|") {
			t.Errorf("%s: %q", n, got[n])
		}
	}
	if !strings.Contains(got["custom"], "no command configured (agents.toml)") {
		t.Errorf("custom: %q", got["custom"])
	}
}
