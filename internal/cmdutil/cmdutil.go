// Package cmdutil holds what every command shares: the Factory that builds
// dependencies lazily, JSON output, and error types that map to exit codes.
// It must not import the Podman bindings (stem-mcp uses it too).
package cmdutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// Factory builds a command's dependencies on demand, so a command that never
// talks to Podman never pays for connecting to it.
type Factory struct {
	IOStreams *iostreams.IOStreams
	Getenv    func(string) string

	Dirs      func() (xdg.Dirs, error)
	Registry  func() (*registry.Registry, error)
	Workspace func() (*workspace.Workspace, error)
	Engine    func(ctx context.Context) (engine.Engine, error)
	// MCPBinary is the absolute path of the stem-mcp executable (mounted
	// into containers and written into agent and SSH configurations).
	MCPBinary func() (string, error)
	// Self is the absolute path of the running executable.
	Self func() (string, error)

	Layout  func() (sockets.Layout, error)
	Audit   func() (*audit.Log, error)
	Manager func(ctx context.Context) (*instance.Manager, error)
	Checker func(ctx context.Context) (*verify.Checker, error)
}

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ExitError carries a process exit code without printing anything more
// (the command already reported, or the exit code is the answer).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// FlagError is a usage mistake: the usage line is printed with it.
type FlagError struct{ err error }

func (e *FlagError) Error() string { return e.err.Error() }
func (e *FlagError) Unwrap() error { return e.err }

// FlagErrorf builds a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{fmt.Errorf(format, args...)}
}

// IsFlagError reports whether err is a usage mistake.
func IsFlagError(err error) bool {
	var fe *FlagError
	return errors.As(err, &fe)
}

// ExactArgs is cobra.ExactArgs with a message that names what is missing.
func ExactArgs(n int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return FlagErrorf("%s takes %d argument(s): %s (got %d)", cmd.CommandPath(), n, usage, len(args))
		}
		return nil
	}
}

// OptionalInstance accepts INSTANCE or nothing (the instance of the task
// directory the command runs in, InstanceOr).
func OptionalInstance(usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return FlagErrorf("%s takes at most one argument: %s, or nothing in a task's directory of the card (got %d)", cmd.CommandPath(), usage, len(args))
		}
		if len(args) == 1 {
			return namedInstance(args[0])
		}
		return nil
	}
}

// namedInstance refuses an instance named by an empty argument (an unset
// shell variable): it names no instance, and is not the same as naming
// none, which means the task directory's.
func namedInstance(name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("no such instance %q: name one (`stemctl list` shows them), or give none in a task's directory of the card", name)
	}
	return nil
}

// AddJSONFlag adds the standard --json flag.
func AddJSONFlag(cmd *cobra.Command, target *bool) {
	cmd.Flags().BoolVar(target, "json", false, "print machine-readable JSON")
}

// RunOr runs runF when a test gave one, else run: the seam through which a
// command's flags and arguments are tested without running it.
func RunOr[O any](ctx context.Context, opts O, runF, run func(context.Context, O) error) error {
	if runF != nil {
		return runF(ctx, opts)
	}
	return run(ctx, opts)
}

// RunE is the RunE of a command whose arguments its Args checked and
// whose options take nothing more from them: RunOr with the command's
// context.
func RunE[O any](opts O, runF, run func(context.Context, O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		return RunOr(cmd.Context(), opts, runF, run)
	}
}

// RunEOptional is RunE for a command of one optional argument, which it
// stores in *arg when given.
func RunEOptional[O any](arg *string, opts O, runF, run func(context.Context, O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			*arg = args[0]
		}
		return RunOr(cmd.Context(), opts, runF, run)
	}
}
