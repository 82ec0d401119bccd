package cmdutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// InstanceHere is the instance of the task whose directory holds dir (the
// current directory when dir is ""), for the per-instance commands run
// without a name, as `stemctl commit` finds its card. In a card with
// instances of several tasks, the task directory decides; at the card's
// top, or with several instances of one task (two targets), the caller is
// asked to name one.
func InstanceHere(ctx context.Context, f *Factory, dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	reg, err := f.Registry()
	if err != nil {
		return "", err
	}
	recs, err := reg.List(ctx)
	if err != nil {
		return "", err
	}
	var inCard, inTask []registry.Record
	for _, r := range recs {
		if r.CardPath == "" || !within(dir, r.CardPath) {
			continue
		}
		inCard = append(inCard, r)
		ws, err := workspace.Open(r.Workspace)
		if err != nil {
			continue
		}
		if res, err := ws.Resolve(r.Profile, r.Series, r.Card, r.Task, r.Target); err == nil && res.TaskDir != r.CardPath && within(dir, res.TaskDir) {
			inTask = append(inTask, r)
		}
	}
	switch {
	case len(inTask) == 1:
		return inTask[0].Instance, nil
	case len(inTask) > 1:
		return "", fmt.Errorf("%s is in the task of several instances (%s): name one", dir, names(inTask))
	case len(inCard) == 1:
		return inCard[0].Instance, nil
	case len(inCard) > 1:
		return "", fmt.Errorf("this card has several instances (%s): name one, or run this in a task's directory", names(inCard))
	}
	return "", FlagErrorf("%s is not in the card of any instance: name the instance or the task (PROFILE SERIES CARD TASK), or run this in a task's directory after `stemctl up`", dir)
}

// InstanceOr is name, or without one the instance of the task whose
// directory the command runs in (InstanceHere).
func InstanceOr(ctx context.Context, f *Factory, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	return InstanceHere(ctx, f, "")
}

func within(dir, root string) bool {
	rel, err := filepath.Rel(root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func names(recs []registry.Record) string {
	var ns []string
	for _, r := range recs {
		ns = append(ns, r.Instance)
	}
	return strings.Join(ns, ", ")
}
