package workspace

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/termtext"
)

// Bounds on the manifest's free text. stem.toml is in the card, which the
// container can write, and its titles and commands are printed in
// listings and shell completion and given to agents as part of their
// context: each must be one line of plain text.
const (
	maxTitle    = 120  // characters
	maxCommand  = 1000 // bytes
	maxEditable = 256  // bytes of one pattern
)

// checkTitle says what is wrong with a title, if anything.
func checkTitle(what, s string) error {
	if n := utf8.RuneCountInString(s); n > maxTitle {
		return fmt.Errorf("%s is %d characters long; a title is one line of at most %d", what, n, maxTitle)
	}
	if err := checkLine(s, false); err != nil {
		return fmt.Errorf("%s %v; a title is one line of plain text (it is shown in listings and given to agents)", what, err)
	}
	return nil
}

// checkCommand says what is wrong with a command, if anything.
func checkCommand(what, s string) error {
	if len(s) > maxCommand {
		return fmt.Errorf("%s is %d bytes long; a command is one line of at most %d (put longer work in a script or a Makefile of the card)", what, len(s), maxCommand)
	}
	if err := checkLine(s, true); err != nil {
		return fmt.Errorf("%s %v; a command is one line run as bash -c in the container (put longer work in a script or a Makefile of the card)", what, err)
	}
	return nil
}

// checkLine finds a line break, a control character, an escape sequence
// or a bidirectional control in s (a tab is allowed when tabs is set):
// anything termtext would remove or a terminal would act on.
func checkLine(s string, tabs bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for i, r := range []rune(s) {
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029':
			return fmt.Errorf("has a line break (character %d)", i+1)
		case r == '\t' && !tabs:
			return fmt.Errorf("has a tab (character %d)", i+1)
		case r == '\t':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			return fmt.Errorf("has the control character U+%04X (character %d)", r, i+1)
		case termtext.String(string(r)) != string(r):
			return fmt.Errorf("has the invisible formatting character U+%04X (character %d)", r, i+1)
		}
	}
	return nil
}

// checkCommands checks every command of c; where names the table.
func checkCommands(where string, c Commands) error {
	for _, f := range []struct{ key, v string }{
		{"build", c.Build}, {"test", c.Test}, {"run", c.Run},
		{"debug", c.Debug}, {"deploy", c.Deploy}, {"debug_program", c.DebugProgram},
	} {
		if f.v == "" {
			continue
		}
		if err := checkCommand(strings.TrimPrefix(where+"."+f.key, "."), f.v); err != nil {
			return err
		}
	}
	return nil
}
