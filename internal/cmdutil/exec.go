package cmdutil

import (
	"context"
	"fmt"
	"strings"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/instance"
)

// ParseEnv turns NAME=VALUE flags into a map.
func ParseEnv(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, FlagErrorf("--env %q: want NAME=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

// ExecInteractive runs spec in the instance with the factory's streams,
// allocating a terminal per mode (auto, always, never) and putting the local
// terminal in raw mode while it runs.
func ExecInteractive(ctx context.Context, f *Factory, m *instance.Manager, ref string, spec engine.ExecSpec, mode string) (int, error) {
	io := f.IOStreams
	switch mode {
	case "auto":
		spec.Tty = io.IsStdinTTY() && io.IsStdoutTTY()
	case "always":
		spec.Tty = true
	case "never":
		spec.Tty = false
	default:
		return -1, FlagErrorf("--tty %q: want auto, always or never", mode)
	}
	spec.Stdin, spec.Stdout, spec.Stderr = io.In, io.Out, io.ErrOut
	if spec.Tty {
		if in, ok := io.InFile(); ok {
			restore, err := RawTerminal(in)
			if err != nil {
				return -1, fmt.Errorf("terminal raw mode: %w", err)
			}
			defer restore()
			sizes, stop := WatchSize(in)
			defer stop()
			if sizes != nil {
				spec.Resize = sizes
			}
		}
	}
	return m.Exec(ctx, ref, spec)
}
