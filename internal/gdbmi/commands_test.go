package gdbmi

import (
	"fmt"
	"strconv"
)

// MI commands only the tests send (as a client of the bridge would): no
// binary of stem needs them.

// StackListVariables lists the selected frame's arguments and locals, with
// values only for simple types.
func StackListVariables() Command {
	return Command{op: "-stack-list-variables", args: []string{"--no-frame-filters", "--simple-values"}}
}

// RegisterNames lists register names by number ("" for unused numbers).
func RegisterNames() Command {
	return Command{op: "-data-list-register-names"}
}

// RegisterFormat is a value format of -data-list-register-values.
type RegisterFormat string

// Register formats.
const (
	FormatHex     RegisterFormat = "x"
	FormatNatural RegisterFormat = "N"
	FormatDecimal RegisterFormat = "d"
	FormatOctal   RegisterFormat = "o"
	FormatBinary  RegisterFormat = "t"
	FormatRaw     RegisterFormat = "r"
)

// RegisterValues reads the given registers by number (all when none are
// given) in the given format.
func RegisterValues(f RegisterFormat, regs ...int) Command {
	switch f {
	case FormatHex, FormatNatural, FormatDecimal, FormatOctal, FormatBinary, FormatRaw:
	default:
		return badCommand("-data-list-register-values", fmt.Errorf("gdbmi: unknown register format %q", f))
	}
	args := []string{"--skip-unavailable", string(f)}
	for _, r := range regs {
		if r < 0 || r > 65535 {
			return badCommand("-data-list-register-values", fmt.Errorf("gdbmi: register number %d out of range", r))
		}
		args = append(args, strconv.Itoa(r))
	}
	return Command{op: "-data-list-register-values", args: args}
}

// BreakList lists breakpoints.
func BreakList() Command { return Command{op: "-break-list"} }
