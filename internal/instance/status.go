package instance

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/cardstate"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/selection"
	"github.com/stem-edu/stem/internal/termtext"
)

// State is an instance's state as status and list show it.
type State string

const (
	StateRunning   State = "running"   // the container runs and both servers answer
	StateUnhealthy State = "unhealthy" // it runs, but something is wrong (Problems)
	StateStopped   State = "stopped"
	StateMissing   State = "missing" // the record's container no longer exists
	StateUnknown   State = "unknown" // the engine did not say
	StateOrphan    State = "orphan"  // a container of stem's that no record names
)

// Status is an instance's observed state.
type Status struct {
	Record    registry.Record   `json:"record"`
	State     State             `json:"state"`
	Container *engine.Container `json:"container,omitempty"`
	Tmux      bool              `json:"tmux_answers"`
	Nvim      bool              `json:"nvim_answers"`
	Selected  bool              `json:"selected"`
	Problems  []string          `json:"problems,omitempty"`
	Hint      string            `json:"hint,omitempty"` // what to run about it
	// Stale lists predecessors' socket directories beside the current one
	// (the next `stemctl up` removes them).
	Stale []string `json:"stale_socket_dirs,omitempty"`
	// CardState is what the card repository says about the instance.
	CardState *CardState `json:"card_state,omitempty"`
	// Git lists what makes git on the host unsafe in the card (also in
	// Problems, with what to do).
	Git []cardgit.Problem `json:"git_problems,omitempty"`
}

// CardState is the card-side copy of an instance's record
// (<card>/.stem/instances/<instance>/instance.json, or the older .rv/
// layout). It is informational, for whoever looks at the card: the card is
// writable from inside the container, so stem never acts on it; the
// registry is what counts.
type CardState struct {
	Dir         string `json:"dir,omitempty"`
	Legacy      bool   `json:"legacy,omitempty"` // read from .rv/
	ContainerID string `json:"container_id,omitempty"`
	// Current: it names the container the registry names.
	Current bool   `json:"current"`
	Error   string `json:"error,omitempty"`
}

// cardState reads rec's card-side state (cardstate.Read: .stem/, then .rv/).
func cardState(rec registry.Record) *CardState {
	if rec.CardPath == "" || rec.Instance == "" {
		return nil
	}
	var have registry.Record
	dir, err := cardstate.Read(rec.CardPath, rec.Instance, &have)
	if err != nil {
		return &CardState{Error: err.Error()}
	}
	cs := &CardState{Dir: dir, Legacy: dir != cardstate.Dir(rec.CardPath, rec.Instance)}
	if len(have.ContainerID) == 64 && strings.Trim(have.ContainerID, "0123456789abcdef") == "" {
		cs.ContainerID = have.ContainerID
	}
	cs.Current = cs.ContainerID != "" && cs.ContainerID == rec.ContainerID
	return cs
}

// Status inspects one instance (by name or container id).
func (m *Manager) Status(ctx context.Context, ref string) (Status, error) {
	rec, err := m.Registry.Find(ctx, ref)
	if err != nil {
		return Status{}, err
	}
	return m.status(ctx, rec), nil
}

func (m *Manager) status(ctx context.Context, rec registry.Record) Status {
	st := m.containerStatus(ctx, rec)
	gitStatus(ctx, &st)
	return st
}

func (m *Manager) containerStatus(ctx context.Context, rec registry.Record) Status {
	st := Status{Record: rec, CardState: cardState(rec)}
	if rec.ThreadKey != "" && rec.SocketDir != "" {
		if stale, err := m.Layout.Siblings(rec.ThreadKey, rec.InstanceKey, filepath.Base(rec.SocketDir)); err == nil {
			st.Stale = stale
		}
	}
	if cur, err := selection.Current(m.Layout); err == nil && cur == filepath.Clean(rec.SocketDir) {
		st.Selected = true
	}
	c, err := m.Engine.Inspect(ctx, rec.ContainerID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		st.State = StateMissing
		st.Problems = append(st.Problems, fmt.Sprintf("container %.12s no longer exists (removed outside stem): `%s` re-creates it", rec.ContainerID, UpCommand(rec)))
		return st
	case err != nil:
		st.State = StateUnknown
		st.Problems = append(st.Problems, err.Error())
		return st
	}
	st.Container = &c
	if c.Labels[labels.Instance] != rec.Instance {
		st.State = StateUnhealthy
		st.Problems = append(st.Problems, fmt.Sprintf("container %.12s carries instance label %q", c.ID, c.Labels[labels.Instance]))
		return st
	}
	if !c.Running {
		st.State = StateStopped
		st.Hint = fmt.Sprintf("`%s` starts it again", UpCommand(rec))
		return st
	}
	dir := rec.Dir()
	if err := m.Layout.Check(dir); err != nil {
		st.Problems = append(st.Problems, err.Error())
	}
	if err := dir.CheckSockets(); err != nil {
		st.Problems = append(st.Problems, err.Error()+"; stem will not use it: `stemctl rm "+rec.Instance+"` and `"+UpCommand(rec)+"` start over")
	}
	h := m.Servers.Check(ctx, dir, c.ID)
	if m.Servers.Tmux != nil {
		if h.Tmux != nil {
			st.Problems = append(st.Problems, "tmux: "+h.Tmux.Error())
		} else {
			st.Tmux = true
		}
	}
	if m.Servers.Nvim != nil {
		if h.Nvim != nil {
			st.Problems = append(st.Problems, "nvim: "+h.Nvim.Error())
		} else {
			st.Nvim = true
		}
	}
	st.State = StateRunning
	if len(st.Problems) > 0 {
		st.State = StateUnhealthy
		st.Hint = fmt.Sprintf("`%s` repairs it (starts nvim again in the same session if only nvim is gone, else re-creates the container)", UpCommand(rec))
	}
	st.clean()
	return st
}

// maxProblem bounds one problem line of a Status.
const maxProblem = 1000

// clean makes the text of st that may come from the container (servers'
// errors, the card's state) one sanitized line each, for the terminal and
// for JSON alike.
func (st *Status) clean() {
	for i, p := range st.Problems {
		st.Problems[i] = termtext.Line(p, maxProblem)
	}
	if st.CardState != nil {
		st.CardState.Error = termtext.Line(st.CardState.Error, maxProblem)
	}
}

// UpCommand is the stemctl command line that brings rec's instance up again
// (devices are kept from the record).
func UpCommand(rec registry.Record) string { return rec.UpCommand() }

// List returns the status of every registered instance.
func (m *Manager) List(ctx context.Context) ([]Status, error) {
	recs, err := m.Registry.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(recs))
	known := map[string]bool{}
	for _, rec := range recs {
		out = append(out, m.status(ctx, rec))
		known[rec.ContainerID] = true
	}
	// Containers stem made that no record names (a registry lost or
	// edited, a crash between create and record): list them so they do not
	// linger unseen, holding memory and a card mount.
	if m.Workspace == "" {
		return out, nil
	}
	ctrs, err := m.Engine.List(ctx, map[string]string{labels.Managed: "true", labels.Workspace: m.Workspace})
	if err != nil {
		return out, fmt.Errorf("list stem's containers: %w", err)
	}
	for _, c := range ctrs {
		if known[c.ID] {
			continue
		}
		l := c.Labels
		c := c
		out = append(out, Status{
			Record: registry.Record{Instance: l[labels.Instance], Profile: l[labels.Profile], Series: l[labels.Series], Card: l[labels.Card],
				Task: l[labels.Task], Target: l[labels.Target], ContainerID: c.ID, Workspace: l[labels.Workspace], Labels: l},
			State:     StateOrphan,
			Container: &c,
			Problems:  []string{fmt.Sprintf("container %s (%s) carries stem's labels but no registry record names it", c.Name, c.State)},
			Hint:      fmt.Sprintf("`podman rm -f %.12s` removes it; `%s` makes a new instance", c.ID, UpCommand(registry.Record{Profile: l[labels.Profile], Series: l[labels.Series], Card: l[labels.Card], Task: l[labels.Task], Target: l[labels.Target]})),
		})
	}
	return out, nil
}
