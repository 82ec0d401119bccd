package instance

import (
	"fmt"
	"os"

	"github.com/stem-edu/stem/internal/cardaccess"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/sockets"
)

// mapFor is the id mapping a container gets: m, except for a rootless
// account's container with devices, whose root must stay the student to
// open them (the device nodes' ACLs are root's to change).
func mapFor(m *idmap.Map, devices []string) *idmap.Map {
	if m == nil || len(devices) > 0 && m.Rootless() {
		return nil
	}
	return m
}

// grant is who gets what under plan's mapping.
func grant(plan *Plan) cardaccess.Grant {
	g := cardaccess.Grant{Container: plan.IDMap.Host}
	if uid := os.Geteuid(); uid != 0 {
		g.Student = uint32(uid)
	}
	return g
}

// grantCard gives a mapped container the card (again: files copied in or
// chmod-ed since lose the container's write access through the mask), and
// the devices it is given.
func (m *Manager) grantCard(plan *Plan) error {
	if plan.IDMap == nil {
		if len(plan.Devices) > 0 && m.IDMap != nil {
			m.progress("note: %s runs without its own user namespace (rootless with --device), so repositories its container makes below the card are yours on the host: see `stemctl status`", plan.Name)
		}
		return nil
	}
	g := grant(plan)
	if _, err := cardaccess.Card(plan.Resolved.CardPath, g); err != nil {
		return fmt.Errorf("give the container access to the card: %w (nothing was changed)", err)
	}
	for _, d := range plan.Devices {
		if err := cardaccess.Device(d, g); err != nil {
			return fmt.Errorf("give the container the device: %w", err)
		}
	}
	return nil
}

// grantSockets lets a mapped container make its sockets in dir (and
// reach dir through the instance directory), and the student use them.
func (m *Manager) grantSockets(plan *Plan, dir sockets.Dir) error {
	if plan.IDMap == nil {
		return nil
	}
	g := grant(plan)
	if err := cardaccess.Traverse(plan.InstanceDir, g); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := cardaccess.SocketDir(dir.Path, g); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	return nil
}

// checkMapped says whether the container's process pid runs with plan's
// mapping.
func checkMapped(plan *Plan, pid int) error {
	if plan.IDMap == nil {
		return nil
	}
	if err := idmap.Check(pid, *plan.IDMap); err != nil {
		return fmt.Errorf("%s: %w", plan.Name, err)
	}
	return nil
}
