package gdbmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Command is one MI command for Client.Exec. Commands are made only by the
// constructors in this file, which take validated values (Location,
// SafeExpr) or fixed arguments, so no agent text reaches gdb unchecked. The
// one exception is Console, which exists for the full access level.
type Command struct {
	op       string   // MI command including the leading '-'
	args     []string // arguments, already in MI syntax
	readOnly bool
	err      error // set by a constructor given invalid input; Exec returns it
}

// Name is the MI operation, for example "-break-insert".
func (c Command) Name() string { return c.op }

// ReadOnly reports whether the command only reads debugger state: it
// neither resumes the program, changes breakpoints nor changes the selected
// frame. These are the commands the observe level may use.
func (c Command) ReadOnly() bool { return c.readOnly }

// String renders the command as sent (without token), for audit logs.
func (c Command) String() string {
	if len(c.args) == 0 {
		return c.op
	}
	return c.op + " " + strings.Join(c.args, " ")
}

// Err returns the constructor's validation error, if any.
func (c Command) Err() error { return c.err }

// line renders the command with a token as one MI input line.
func (c Command) line(token string) (string, error) {
	if c.err != nil {
		return "", c.err
	}
	if c.op == "" {
		return "", errors.New("gdbmi: empty Command: build commands with the constructors")
	}
	l := token + c.String()
	// Every argument is a fixed word or went through Quote, so this cannot
	// happen; it is checked because a second line would be a second command.
	if strings.ContainsAny(l, "\n\r\x00") {
		return "", fmt.Errorf("gdbmi: command %s contains a line break", c.op)
	}
	return l + "\n", nil
}

func badCommand(op string, err error) Command { return Command{op: op, err: err} }

// BreakInsert sets a breakpoint at a validated location.
func BreakInsert(loc Location) Command {
	if loc.s == "" {
		return badCommand("-break-insert", errors.New("gdbmi: empty location: use ParseLocation"))
	}
	return Command{op: "-break-insert", args: []string{Quote(loc.s)}}
}

// ExecContinue resumes the program.
func ExecContinue() Command { return Command{op: "-exec-continue"} }

// ExecStep steps one source line, entering calls.
func ExecStep() Command { return Command{op: "-exec-step"} }

// ExecNext steps one source line, stepping over calls.
func ExecNext() Command { return Command{op: "-exec-next"} }

// ExecFinish runs until the selected frame returns.
func ExecFinish() Command { return Command{op: "-exec-finish"} }

// ExecInterrupt stops the running program.
func ExecInterrupt() Command { return Command{op: "-exec-interrupt"} }

// MaxFrames bounds StackListFrames and StackSelectFrame.
const MaxFrames = 1000

// StackSelectFrame selects frame n (0 is the innermost). The selection is
// shared with the student's console.
func StackSelectFrame(n int) Command {
	if n < 0 || n >= MaxFrames {
		return badCommand("-stack-select-frame", fmt.Errorf("gdbmi: frame %d out of range 0..%d", n, MaxFrames-1))
	}
	return Command{op: "-stack-select-frame", args: []string{strconv.Itoa(n)}}
}

// StackListFrames lists up to limit frames from the innermost. Frame
// filters (Python) are not run.
func StackListFrames(limit int) Command {
	if limit < 1 || limit > MaxFrames {
		return badCommand("-stack-list-frames", fmt.Errorf("gdbmi: frame limit %d out of range 1..%d", limit, MaxFrames))
	}
	return Command{op: "-stack-list-frames", args: []string{"--no-frame-filters", "0", strconv.Itoa(limit - 1)}, readOnly: true}
}

// StackListVariables lists the selected frame's arguments and locals, with
// values only for simple types.
func StackListVariables() Command {
	return Command{op: "-stack-list-variables", args: []string{"--no-frame-filters", "--simple-values"}, readOnly: true}
}

// DataEvaluate prints a validated expression in the selected frame. The
// value is returned as Result.Console.
//
// It is sent as `with language c -- with may-call-functions off -- output
// EXPR` rather than -data-evaluate-expression because even a call-free
// expression can make gdb call malloc in the program (using an array that
// lives in a gdb convenience variable as a pointer copies it into the
// inferior); may-call-functions off refuses that, and `with` restores the
// student's settings when the command ends. `output` does not add to the
// student's value history.
func DataEvaluate(e SafeExpr) Command {
	if e.s == "" {
		return badCommand("-interpreter-exec", errors.New("gdbmi: empty expression: use ParseSafeExpr"))
	}
	return consoleCommand("with language c -- with may-call-functions off -- output "+e.s, true)
}

// RegisterNames lists register names by number ("" for unused numbers).
func RegisterNames() Command {
	return Command{op: "-data-list-register-names", readOnly: true}
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
	return Command{op: "-data-list-register-values", args: args, readOnly: true}
}

// ThreadInfo lists threads with their state and selected frame.
func ThreadInfo() Command { return Command{op: "-thread-info", readOnly: true} }

// BreakList lists breakpoints.
func BreakList() Command { return Command{op: "-break-list", readOnly: true} }

// MaxConsoleLen bounds Console text.
const MaxConsoleLen = 4096

// Console runs one gdb console command, as the student could type it, and
// returns its output in Result.Console. It is for the full access level
// only: a console command can do anything the student's account can (shell,
// python, call). The text is sent as one MI C-string argument, so quotes
// and backslashes in it cannot end the argument or start another MI
// command; line breaks and NUL are refused because a console command is one
// line.
func Console(text string) Command {
	switch {
	case strings.TrimSpace(text) == "":
		return badCommand("-interpreter-exec", errors.New("gdbmi: empty console command"))
	case len(text) > MaxConsoleLen:
		return badCommand("-interpreter-exec", fmt.Errorf("gdbmi: console command longer than %d bytes", MaxConsoleLen))
	case strings.ContainsAny(text, "\n\r\x00"):
		return badCommand("-interpreter-exec", errors.New("gdbmi: console command contains a line break or NUL: send one command per call"))
	}
	return consoleCommand(text, false)
}

func consoleCommand(text string, readOnly bool) Command {
	return Command{op: "-interpreter-exec", args: []string{"console", Quote(text)}, readOnly: readOnly}
}

// statusRegisters is the read-only console command Status uses: the
// architecture's own "general" register group, which is what a student sees
// with a plain `info registers`.
func statusRegisters() Command { return consoleCommand("info registers general", true) }
