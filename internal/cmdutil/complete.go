package cmdutil

import (
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/profiles"
)

// CompleteTarget completes --target from the profile named by positional
// argument profileArg (0 for up, 1 for agent start, after PROVIDER).
func CompleteTarget(profileArg int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		nofile := cobra.ShellCompDirectiveNoFileComp
		if len(args) <= profileArg {
			return nil, nofile
		}
		p, err := profiles.Get(args[profileArg])
		if err != nil {
			return nil, nofile
		}
		var out []string
		for _, t := range p.Targets {
			out = append(out, t.Name+"\t"+t.Description)
		}
		return out, nofile
	}
}

// devicePatterns are where a Pico 2's probe and serial console appear.
var devicePatterns = []string{"serial/by-id/*", "ttyACM*", "ttyUSB*", "bus/usb/*/*"}

// CompleteDevices completes --device with the USB serial and probe nodes
// present now, stable /dev/serial/by-id names first.
func CompleteDevices() cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return devicesUnder("/dev"), cobra.ShellCompDirectiveNoFileComp
	}
}

func devicesUnder(dev string) []string {
	var out []string
	for _, p := range devicePatterns {
		m, _ := filepath.Glob(filepath.Join(dev, p))
		sort.Strings(m)
		out = append(out, m...)
	}
	return out
}

// Fixed completes a flag with fixed values and no file names.
func Fixed(values ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
}
