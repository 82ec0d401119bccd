package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// SetAgentPolicy rewrites the card's stem.toml as it was copied, plus
// table appended as [defaults.agents] (empty: none), the way a teacher
// edits the card. It checks that the manifest still loads.
func (in *Instance) SetAgentPolicy(t testing.TB, table string) {
	t.Helper()
	src := filepath.Join(RepoRoot(), "examples", "workspace", in.Resolved.Series, in.Resolved.Card, workspace.ManifestName)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if table != "" {
		data = append(data, "\n[defaults.agents]\n"+table+"\n"...)
	}
	dst := filepath.Join(in.Resolved.CardPath, workspace.ManifestName)
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.LoadManifest(in.Resolved.CardPath); err != nil {
		t.Fatalf("the manifest with agents table %q: %v", table, err)
	}
}

// RecordAgentPolicy sets the policy the registry recorded when the
// instance was made.
func (in *Instance) RecordAgentPolicy(t testing.TB, p agentpolicy.Policy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := registry.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	in.Record.Policy = &p
	if err := reg.Put(ctx, in.Record); err != nil {
		t.Fatal(err)
	}
}
