package cmdutil

import (
	"context"

	"github.com/stem-edu/stem/internal/consent"
	"github.com/stem-edu/stem/internal/registry"
)

// FindInstance finds the record of the instance name names, or of the
// task directory the command runs in when name is empty (InstanceOr).
func FindInstance(ctx context.Context, f *Factory, name string) (registry.Record, error) {
	name, err := InstanceOr(ctx, f, name)
	if err != nil {
		return registry.Record{}, err
	}
	reg, err := f.Registry()
	if err != nil {
		return registry.Record{}, err
	}
	return reg.Find(ctx, name)
}

// Consents opens the store of the student's consents in the state
// directory.
func Consents(f *Factory) (*consent.Store, error) {
	dirs, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	return consent.Open(dirs.State)
}
