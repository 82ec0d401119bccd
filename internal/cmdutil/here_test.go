package cmdutil_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/registry"
)

// Without a name, the per-instance commands take the instance of the task
// directory they run in.
func TestInstanceHere(t *testing.T) {
	t.Parallel()
	ws, err := filepath.Abs("../../examples/workspace")
	if err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(ws, "demo", "hello")
	state := t.TempDir()
	reg, err := registry.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	f := &cmdutil.Factory{Registry: func() (*registry.Registry, error) { return reg, nil }}
	ctx := context.Background()
	put := func(inst, profile, task, target string) {
		t.Helper()
		if err := reg.Put(ctx, registry.Record{Instance: inst, Profile: profile, Series: "demo", Card: "hello", Task: task, Target: target, CardPath: card, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cmdutil.InstanceHere(ctx, f, filepath.Join(card, "t1")); err == nil || !strings.Contains(err.Error(), "not in the card of any instance") {
		t.Fatalf("no instances: %v", err)
	}
	put("native-amd64-demo-hello-t1", "native-amd64", "1", "")
	for _, dir := range []string{card, filepath.Join(card, "t1"), filepath.Join(card, "t2")} {
		if got, err := cmdutil.InstanceHere(ctx, f, dir); err != nil || got != "native-amd64-demo-hello-t1" {
			t.Fatalf("%s with one instance: %q %v", dir, got, err)
		}
	}
	put("hazard3-sim-demo-hello-t2", "hazard3-sim", "2", "")
	if got, err := cmdutil.InstanceHere(ctx, f, filepath.Join(card, "t2")); err != nil || got != "hazard3-sim-demo-hello-t2" {
		t.Fatalf("in t2: %q %v", got, err)
	}
	if _, err := cmdutil.InstanceHere(ctx, f, card); err == nil || !strings.Contains(err.Error(), "several instances") {
		t.Fatalf("at the card's top with two: %v", err)
	}
	put("rp2350-demo-hello-t3-rv", "rp2350", "3", "rp2350-rv")
	put("rp2350-demo-hello-t3-arm", "rp2350", "3", "rp2350-arm")
	if _, err := cmdutil.InstanceHere(ctx, f, filepath.Join(card, "t3")); err == nil || !strings.Contains(err.Error(), "name one") {
		t.Fatalf("two targets of one task: %v", err)
	}
	if _, err := cmdutil.InstanceHere(ctx, f, os.TempDir()); err == nil || !cmdutil.IsFlagError(err) {
		t.Fatalf("outside every card: %v", err)
	}
}
