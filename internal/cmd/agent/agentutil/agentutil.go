// Package agentutil is what the `stemctl agent` subcommands share: building
// the agent environment from the factory, launching an agent on a verified
// instance (start and attach), printing, and completion.
package agentutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/agent"
	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/workspace"
)

// Providers loads the provider configuration.
func Providers(f *cmdutil.Factory) (*agentcli.Providers, error) {
	d, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	return agentcli.LoadProviders(d.Config)
}

// NewEnv builds the agent environment. The agent inherits this process's
// environment (PATH, the CLI's credentials).
func NewEnv(f *cmdutil.Factory) (*agent.Env, error) {
	d, err := f.Dirs()
	if err != nil {
		return nil, err
	}
	l, err := f.Layout()
	if err != nil {
		return nil, err
	}
	ps, err := agentcli.LoadProviders(d.Config)
	if err != nil {
		return nil, err
	}
	return &agent.Env{Dirs: d, Layout: l, Store: agentstore.NewStore(l, d.State), Environ: os.Environ(), Providers: ps,
		Progress: nil, RemoveSandbox: removeSandbox(f)}, nil
}

// removeSandbox removes a sandbox container left behind, after checking
// it carries stem's agent label (a name alone could be anyone's container).
func removeSandbox(f *cmdutil.Factory) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		eng, err := f.Engine(ctx)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := eng.Inspect(ctx, name)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.Labels[sandbox.Label] == "" {
			return fmt.Errorf("container %s is not an agent sandbox", name)
		}
		return eng.Remove(ctx, c.ID, true)
	}
}

// CheckLaunch checks what start and attach are given before anything
// runs: --level, then which instance (instance, which finds it without
// starting anything: outside every card that is the mistake to name, not
// the provider's key), then the provider (CheckProvider).
func CheckLaunch(f *cmdutil.Factory, provider, level string, here bool, instance func() error) (levels.Level, error) {
	l, err := levels.Parse(level)
	if err != nil {
		return 0, cmdutil.FlagErrorf("--level: %v", err)
	}
	if err := instance(); err != nil {
		return 0, err
	}
	if err := CheckProvider(f, provider, here); err != nil {
		return 0, err
	}
	return l, nil
}

// CheckProvider fails early (before any container starts) with every
// refusal that does not need the instance: an unknown provider, a missing
// program, the adapter's checks (Gemini's settings directory, a custom
// command's placeholders), and --here without terminal files. The agent
// socket's length is checked by `up` itself (sockets.CheckLengths).
func CheckProvider(f *cmdutil.Factory, name string, here bool) error {
	env, err := NewEnv(f)
	if err != nil {
		return err
	}
	mode := agentstore.ModeWindow
	if here {
		mode = agentstore.ModeHere
	}
	if _, _, err := env.Check(name, mode); err != nil {
		return err
	}
	if here {
		if _, _, _, err := hereFiles(f); err != nil {
			return err
		}
	}
	return nil
}

// hereFiles are the files a --here agent runs on.
func hereFiles(f *cmdutil.Factory) (in, out, errOut *os.File, err error) {
	ios := f.IOStreams
	in, ok1 := ios.InFile()
	out, ok2 := ios.Out.(*os.File)
	errOut, ok3 := ios.ErrOut.(*os.File)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, fmt.Errorf("--here needs a terminal (or at least real standard files); without one start the agent in the student's tmux (drop --here)")
	}
	return in, out, errOut, nil
}

// InstanceName resolves an --instance value (a name, or a container id or
// id prefix as for attach) to the instance name through the registry. A
// value the registry does not know is returned as given: agent records
// may name an instance whose record is gone.
func InstanceName(ctx context.Context, f *cmdutil.Factory, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	reg, err := f.Registry()
	if err != nil {
		return "", err
	}
	rec, err := reg.Find(ctx, ref)
	if errors.Is(err, registry.ErrNotFound) {
		return ref, nil
	}
	if err != nil {
		return "", fmt.Errorf("--instance %s: %w", ref, err)
	}
	return rec.Instance, nil
}

// AddLaunchFlags registers the flags start and attach share: --level,
// --here and --background.
func AddLaunchFlags(cmd *cobra.Command, level *string, here, background *bool) {
	cmd.Flags().StringVar(level, "level", levels.Assist.String(), "access level of the agent's stem-mcp: observe, assist or full")
	cmd.Flags().BoolVar(here, "here", false, "run the agent in this terminal instead of a window of the student's tmux")
	cmd.Flags().BoolVar(background, "background", false, "open the agent's window without switching the student's tmux to it")
	cmd.RegisterFlagCompletionFunc("level", cobra.FixedCompletions(levels.Names(), cobra.ShellCompDirectiveNoFileComp))
}

// LaunchOptions are what start and attach share.
type LaunchOptions struct {
	Provider   string
	Level      levels.Level
	Instance   string
	Resolved   *workspace.Resolved
	Here       bool
	Background bool
	Extra      []string
	JSON       bool
}

// Launch verifies the instance and starts the agent in a window of the
// student's tmux, or runs it here.
func Launch(ctx context.Context, f *cmdutil.Factory, o LaunchOptions) error {
	env, err := NewEnv(f)
	if err != nil {
		return err
	}
	if env.MCPBinary, err = f.MCPBinary(); err != nil {
		return err
	}
	if env.Self, err = f.Self(); err != nil {
		return err
	}
	checker, err := f.Checker(ctx)
	if err != nil {
		return err
	}
	// The full check: registry record, full container id, instance label,
	// tmux answering in this container's socket directory (a Neovim that
	// does not answer fails only the agent's editor tools).
	target, err := checker.Instance(ctx, o.Instance)
	if err != nil {
		return err
	}
	mode := agentstore.ModeWindow
	if o.Here {
		mode = agentstore.ModeHere
	}
	p, err := env.Prepare(agent.Request{Provider: o.Provider, Level: o.Level, Target: target, Resolved: o.Resolved, Extra: o.Extra}, mode)
	if err != nil {
		return err
	}
	ios := f.IOStreams
	if o.Here {
		in, out, errOut, err := hereFiles(f)
		if err != nil {
			env.Store.Remove(p.Record.ID)
			return err
		}
		fmt.Fprintf(ios.ErrOut, "stemctl: agent %s: %s on %s at level %s, here (MCP server %q: %s)\n",
			p.Record.ID, p.Record.Provider, p.Record.Instance, p.Record.Level, agentcli.ServerName, serverLine(p.Record.MCP))
		code, err := env.RunHere(p, in, out, errOut)
		if err != nil {
			return err
		}
		if code != 0 {
			return &cmdutil.ExitError{Code: code}
		}
		return nil
	}
	rec, err := env.StartWindow(ctx, p, o.Background, instance.DialTmux, target.Record)
	if err != nil {
		env.Store.Remove(p.Record.ID)
		return err
	}
	if o.JSON {
		return cmdutil.WriteJSON(ios.Out, rec)
	}
	out := ios.Out
	fmt.Fprintf(out, "agent %s: %s on %s at level %s, in window %q (%s) of the student's tmux\n", rec.ID, rec.Provider, rec.Instance, rec.Level, rec.Provider, rec.Window)
	fmt.Fprintf(out, "  MCP      server %q: %s\n", agentcli.ServerName, serverLine(rec.MCP))
	fmt.Fprintf(out, "  context  %s (and the resource stem://context)\n", rec.Context)
	fmt.Fprintf(out, "  see it   stemctl attach %s\n", rec.Instance)
	fmt.Fprintf(out, "  stop     stemctl agent stop %s\n", rec.ID)
	return nil
}

func serverLine(e mcpconfig.Entry) string {
	return mcpconfig.ShellQuote(append([]string{e.Command}, e.Args...))
}

// Since renders a start time for tables.
func Since(t time.Time, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	return t.Local().Format("2006-01-02 15:04") + " (" + d.String() + " ago)"
}

// CompleteProvider completes provider names from the configuration.
func CompleteProvider(f *cmdutil.Factory) func(string) ([]string, cobra.ShellCompDirective) {
	return func(toComplete string) ([]string, cobra.ShellCompDirective) {
		ps, err := Providers(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, p := range ps.List() {
			if strings.HasPrefix(p.Name, toComplete) {
				out = append(out, p.Name+"\t"+p.Adapter+" adapter")
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteAgent completes running agents' ids.
func CompleteAgent(f *cmdutil.Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		env, err := NewEnv(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		sts, _ := env.Store.List(false)
		var out []string
		for _, s := range sts {
			if s.Running && strings.HasPrefix(s.ID, toComplete) {
				out = append(out, s.ID+"\t"+s.Provider+" on "+s.Instance+" ("+s.Level+")")
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
