package cmdutil

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// TaskArgs are the PROFILE SERIES CARD TASK positional arguments.
const TaskArgs = "PROFILE SERIES CARD TASK"

// InstanceOrTask accepts what a per-task command takes: nothing (in a
// task's directory), INSTANCE, or PROFILE SERIES CARD TASK.
func InstanceOrTask(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 && len(args) != 4 {
			return FlagErrorf("%s takes INSTANCE or %s (or nothing, in a task's directory)", verb, TaskArgs)
		}
		if len(args) == 1 {
			return namedInstance(args[0])
		}
		return nil
	}
}

// AddTaskFlags adds --target and --device, for a command that may make
// the instance of PROFILE SERIES CARD TASK; the task's arguments start at
// argument first (for completing --target).
func AddTaskFlags(cmd *cobra.Command, target *string, devices *[]string, first int) {
	cmd.Flags().StringVar(target, "target", "", "build target (rp2350: rp2350-rv or rp2350-arm)")
	cmd.Flags().StringArrayVar(devices, "device", nil, "host device to pass in to a new instance (rp2350 only; repeatable)")
	cmd.RegisterFlagCompletionFunc("target", CompleteTarget(first))
	cmd.RegisterFlagCompletionFunc("device", CompleteDevices())
}

// ResolveTask resolves PROFILE SERIES CARD TASK [--target] in the workspace.
func ResolveTask(f *Factory, args []string, target string) (*workspace.Resolved, error) {
	// The workspace resolver reads an empty profile as "the task's own";
	// on the command line an empty PROFILE is a mistake (an unset shell
	// variable), not a request for the default.
	if args[0] == "" {
		return nil, &workspace.NotFoundError{Kind: "profile", Name: "", Candidates: profiles.Names()}
	}
	ws, err := f.Workspace()
	if err != nil {
		return nil, err
	}
	return ws.Resolve(args[0], args[1], args[2], args[3], target)
}

// InstanceOrTaskArgs reads the arguments InstanceOrTask accepted. It
// resolves PROFILE SERIES CARD TASK before Podman is reached, so bad
// names and manifests are reported without it and before anything is
// made; else it returns the instance named or, with no arguments, the
// one of the task directory dir ("": the working directory).
func InstanceOrTaskArgs(ctx context.Context, f *Factory, dir string, args []string, target string) (string, *workspace.Resolved, error) {
	switch len(args) {
	case 0:
		name, err := InstanceHere(ctx, f, dir)
		return name, nil, err
	case 4:
		r, err := ResolveTask(f, args, target)
		return "", r, err
	}
	return args[0], nil, nil
}

// ResolveRecord resolves the task an instance's record names, in the
// record's workspace.
func ResolveRecord(rec registry.Record) (*workspace.Resolved, error) {
	ws, err := workspace.Open(rec.Workspace)
	if err != nil {
		return nil, err
	}
	return ws.Resolve(rec.Profile, rec.Series, rec.Card, rec.Task, rec.Target)
}

// CompleteTask completes PROFILE SERIES CARD TASK from the workspace.
func CompleteTask(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		nofile := cobra.ShellCompDirectiveNoFileComp
		switch len(args) {
		case 0:
			return profiles.Names(), nofile
		}
		ws, err := f.Workspace()
		if err != nil {
			return nil, nofile
		}
		switch len(args) {
		case 1:
			s, _ := ws.Series()
			return s, nofile
		case 2:
			c, _ := ws.Cards(args[1])
			return c, nofile
		case 3:
			path, err := ws.CardPath(args[1], args[2])
			if err != nil {
				return nil, nofile
			}
			m, err := workspace.LoadManifest(path)
			if err != nil {
				return nil, nofile
			}
			var out []string
			for _, t := range m.Tasks {
				for _, p := range t.Profiles {
					if p == args[0] {
						out = append(out, t.ID+"\t"+t.Title)
					}
				}
			}
			return out, nofile
		}
		return nil, nofile
	}
}

// CompleteInstance completes registered instance names.
func CompleteInstance(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		reg, err := f.Registry()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		recs, err := reg.List(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, r := range recs {
			if strings.HasPrefix(r.Instance, toComplete) {
				out = append(out, r.Instance+"\t"+r.Series+"/"+r.Card+" task "+r.Task)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
