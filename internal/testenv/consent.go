package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/consent"
)

// The student's consents as `stemctl allow` records them on the host
// (internal/cmd/allow tests the command itself).

func (in *Instance) consentUpdate(t testing.TB, fn func(*consent.Entry)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := consent.Open(in.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, in.Record.Instance, func(e *consent.Entry) error { fn(e); return nil }); err != nil {
		t.Fatal(err)
	}
}

// AllowPane opens pane of the instance's container to assist-level keys.
func (in *Instance) AllowPane(t testing.TB, pane string) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) {
		e.Panes = append(e.Panes, consent.Pane{ContainerID: in.Record.ContainerID, Pane: pane, Since: time.Now(), By: "test"})
	})
}

// DisallowPane closes pane again.
func (in *Instance) DisallowPane(t testing.TB, pane string) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) {
		e.Panes = slices.DeleteFunc(e.Panes, func(p consent.Pane) bool { return p.Pane == pane })
	})
}

// AllowEdit marks the card-relative file editable, as given (a test may
// record what the command would refuse, to show stem-mcp refuses it too).
func (in *Instance) AllowEdit(t testing.TB, file string) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) {
		e.Edits = append(e.Edits, consent.Edit{File: file, Since: time.Now(), By: "test"})
	})
}

// DisallowEdit takes the mark back.
func (in *Instance) DisallowEdit(t testing.TB, file string) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) {
		e.Edits = slices.DeleteFunc(e.Edits, func(x consent.Edit) bool { return x.File == file })
	})
}

// SetPolicyFloor sets the instance's agent policy floor, as
// `stemctl up` records it when the instance is first made.
func (in *Instance) SetPolicyFloor(t testing.TB, p agentpolicy.Policy) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) { e.Floor = &p })
}

// SetEditableFloor sets the instance's recorded editable globs, as
// `stemctl policy --loosen` takes the card's.
func (in *Instance) SetEditableFloor(t testing.TB, globs []string) {
	t.Helper()
	in.consentUpdate(t, func(e *consent.Entry) { g := append([]string{}, globs...); e.EditableFloor = &g })
}
