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
	op   string   // MI command including the leading '-'
	args []string // arguments, already in MI syntax
	err  error    // set by a constructor given invalid input; Exec returns it
}

// String renders the command as sent (without token), for audit logs.
func (c Command) String() string {
	if len(c.args) == 0 {
		return c.op
	}
	return c.op + " " + strings.Join(c.args, " ")
}

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
	return Command{op: "-stack-list-frames", args: []string{"--no-frame-filters", "0", strconv.Itoa(limit - 1)}}
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
	return consoleCommand("with language c -- with may-call-functions off -- output " + e.s)
}

// ThreadInfo lists threads with their state and selected frame.
func ThreadInfo() Command { return Command{op: "-thread-info"} }

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
	return consoleCommand(text)
}

func consoleCommand(text string) Command {
	return Command{op: "-interpreter-exec", args: []string{"console", Quote(text)}}
}

// statusRegisters is the read-only console command Status uses: the
// architecture's own "general" register group, which is what a student sees
// with a plain `info registers`.
func statusRegisters() Command { return consoleCommand("info registers general") }
