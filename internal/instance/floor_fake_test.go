package instance_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/workspace"
)

const tightAgents = "max_level = \"assist\"\nedits = \"propose\"\napprove = [\"task_action\"]"

// setAgents rewrites the card's stem.toml with table as [defaults.agents]
// (empty: none), as code in the container can, and resolves the task
// again the way the student's next command does.
func (w *fakeWorld) setAgents(table string) {
	w.t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "examples", "workspace", "demo", "hello", workspace.ManifestName)
	data, err := os.ReadFile(src)
	if err != nil {
		w.t.Fatal(err)
	}
	if table != "" {
		data = append(data, "\n[defaults.agents]\n"+table+"\n"...)
	}
	if err := os.WriteFile(filepath.Join(w.r.CardPath, workspace.ManifestName), data, 0o644); err != nil {
		w.t.Fatal(err)
	}
	ws, err := workspace.Open(w.r.Workspace)
	if err != nil {
		w.t.Fatal(err)
	}
	if w.r, err = ws.Resolve("native-amd64", "demo", "hello", "1", ""); err != nil {
		w.t.Fatal(err)
	}
}

func (w *fakeWorld) recordedPolicy() agentpolicy.Policy {
	w.t.Helper()
	rec := w.record(instance.Name(w.r))
	if rec.Policy == nil {
		w.t.Fatal("the record has no policy")
	}
	return *rec.Policy
}

func tight(p agentpolicy.Policy) bool {
	return p.MaxLevel == agentpolicy.CapAssist && p.Edits == agentpolicy.EditsPropose && p.NeedsApproval("task_action")
}

// TestFakeFloorHoldsOnEveryPath: a stem.toml loosened from inside the
// container is not recorded when the container is started again, re-created
// (changed configuration, or removed behind stem's back); rm + up starts
// from the card. The control removes the floor alone: the same start then
// records the loosened policy, as every start did before the floor.
func TestFakeFloorHoldsOnEveryPath(t *testing.T) {
	w := newFakeWorld(t)
	ctx := context.Background()
	w.setAgents(tightAgents)
	first := w.mustUp("created").Record
	if !tight(*first.Policy) {
		t.Fatalf("first record: %+v", *first.Policy)
	}
	w.setAgents("")
	if _, err := w.m.Down(ctx, first.Instance, time.Second); err != nil {
		t.Fatal(err)
	}
	w.mustUp("started")
	if p := w.recordedPolicy(); !tight(p) {
		t.Fatalf("start after an exit recorded %+v", p)
	}
	w.rebuild("changed")
	w.mustUp("recreated")
	if p := w.recordedPolicy(); !tight(p) {
		t.Fatalf("re-create recorded %+v", p)
	}
	if err := w.e.Remove(ctx, w.record(first.Instance).ContainerID, true); err != nil {
		t.Fatal(err)
	}
	w.mustUp("recreated")
	if p := w.recordedPolicy(); !tight(p) {
		t.Fatalf("re-create of a removed container recorded %+v", p)
	}
	// A tighter card tightens at once.
	w.setAgents("max_level = \"observe\"")
	w.m.Down(ctx, first.Instance, time.Second)
	w.mustUp("started")
	if p := w.recordedPolicy(); p.MaxLevel != agentpolicy.CapObserve || p.Edits != agentpolicy.EditsPropose {
		t.Fatalf("a tighter card: %+v", p)
	}

	// Control: without the floor the same start records the card's.
	w.setAgents("")
	st, err := w.m.Consents()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, first.Instance); err != nil {
		t.Fatal(err)
	}
	rec := w.record(first.Instance)
	rec.Policy = nil // as an older stem recorded it
	if err := w.m.Registry.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	w.m.Down(ctx, first.Instance, time.Second)
	w.mustUp("started")
	if p := w.recordedPolicy(); !p.IsDefault() {
		t.Fatalf("control: without a floor the start recorded %+v, not the card's", p)
	}

	// rm + up starts from the card.
	w.setAgents(tightAgents)
	w.mustUp("reused")
	if _, err := w.m.Remove(ctx, first.Instance); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.Get(ctx, first.Instance); e.Floor != nil {
		t.Fatalf("rm kept the floor %+v", *e.Floor)
	}
	w.setAgents("")
	w.mustUp("created")
	if p := w.recordedPolicy(); !p.IsDefault() {
		t.Fatalf("rm + up recorded %+v", p)
	}
}

// TestFakePanePermissionsEndWithTheRun: a pane allowed in one run of the
// container is not allowed once it starts again (tmux numbers its panes
// afresh) nor in a re-created container; edit marks stay; rm forgets
// both.
func TestFakePanePermissionsEndWithTheRun(t *testing.T) {
	w := newFakeWorld(t)
	ctx := context.Background()
	rec := w.mustUp("created").Record
	st, err := w.m.Consents()
	if err != nil {
		t.Fatal(err)
	}
	allow := func(cid string) {
		t.Helper()
		err := st.Update(ctx, rec.Instance, func(e *consent.Entry) error {
			e.Panes = append(e.Panes, consent.Pane{ContainerID: cid, Pane: "%1"})
			e.Edits = append(e.Edits, consent.Edit{File: "t1/notes.md"})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(how, cid string, pane bool) {
		t.Helper()
		e, err := st.Get(ctx, rec.Instance)
		if err != nil {
			t.Fatal(err)
		}
		if e.PaneAllowed(cid, "%1") != pane || !e.Editable("t1/notes.md") {
			t.Fatalf("%s: %+v", how, e)
		}
	}
	allow(rec.ContainerID)
	w.mustUp("reused")
	check("reused", rec.ContainerID, true)
	w.m.Down(ctx, rec.Instance, time.Second)
	w.mustUp("started")
	check("started again", rec.ContainerID, false)
	allow(rec.ContainerID)
	w.rebuild("changed")
	re := w.mustUp("recreated").Record
	check("re-created (old id)", rec.ContainerID, false)
	check("re-created (new id)", re.ContainerID, false)
	if _, err := w.m.Remove(ctx, rec.Instance); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.Get(ctx, rec.Instance); len(e.Edits) != 0 || len(e.Panes) != 0 {
		t.Fatalf("rm kept %+v", e)
	}
}
