package instance

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/registry"
)

// Consents is the host's record of the student's consents (panes, edit
// marks, the policy floor), beside the registry in the state directory.
func (m *Manager) Consents() (*consent.Store, error) {
	return consent.Open(filepath.Dir(m.Registry.Path()))
}

// settlePolicy is the agent policy to record for instance, now in
// container cid, whose card says card: never looser than the floor set
// when the instance was first made. Every path that records an instance
// (create, re-create, start of a stopped container) comes through here, so
// a stem.toml loosened from inside the container is met with the floor
// however the container came back. editable is the card's editable globs,
// recorded the first time as the editable floor.
func (m *Manager) settlePolicy(ctx context.Context, instance, cid string, card agentpolicy.Policy, editable []string) (agentpolicy.Policy, error) {
	st, err := m.Consents()
	if err != nil {
		return agentpolicy.Policy{}, err
	}
	var prior *agentpolicy.Policy
	if rec, err := m.Registry.Get(ctx, instance); err == nil {
		prior = rec.Policy
	} else if !errors.Is(err, registry.ErrNotFound) {
		return agentpolicy.Policy{}, err
	}
	p, err := st.Settle(ctx, instance, cid, prior, card, editable, "recorded when the instance was made")
	if err != nil {
		return agentpolicy.Policy{}, fmt.Errorf("instance %s: the student's consents: %w", instance, err)
	}
	return p, nil
}
