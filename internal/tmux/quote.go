package tmux

import (
	"fmt"
	"strings"
)

// MaxQuoted bounds the strings Quote accepts.
const MaxQuoted = 64 << 10

// Quote returns s as one word for tmux's command parser, such that the
// parser yields exactly the bytes of s: no $VAR or ~ expansion, no ';' or
// brace splitting, no '#' comment, no line break (which would end a control
// mode command line). It fails only for strings tmux cannot hold (a NUL byte
// ends a C string) and for strings over MaxQuoted bytes.
//
// The result is a double-quoted string in which '"', '\\', '$' and '~' are
// escaped with a backslash and every byte outside printable ASCII is an
// octal escape (\ooo). Quote does not stop a command from expanding
// formats (#{...}, #()) in an argument it treats as a format: use
// QuoteFormat for those, and never pass untrusted text to arguments that
// are also shell commands or strftime templates (display-message,
// if-shell, run-shell, ...).
func Quote(s string) (string, error) {
	if len(s) > MaxQuoted {
		return "", fmt.Errorf("%w: string of %d bytes to quote (limit %d)", ErrInvalidArgument, len(s), MaxQuoted)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("%w: tmux cannot hold a NUL byte", ErrInvalidArgument)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '$' || c == '~':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// QuoteFormat is Quote for an argument that tmux expands as a format
// (new-window -n and -c, split-window -c, rename-window): it first makes
// every '#' literal, so #{...}, #(...) (which would run a shell command) and
// #X aliases stay text. In tmux formats "##" is a literal '#', except that a
// run of '#' before '[' is kept as a style; "#[" is therefore written as
// "#{l:#[}" (the l: modifier returns its text unexpanded).
func QuoteFormat(s string) (string, error) {
	if strings.IndexByte(s, '#') < 0 {
		return Quote(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '#':
			b.WriteByte(s[i])
		case i+1 < len(s) && s[i+1] == '[':
			b.WriteString("#{l:#[}")
			i++
		default:
			b.WriteString("##")
		}
	}
	if b.Len() > MaxQuoted {
		return "", fmt.Errorf("%w: string of %d bytes to quote (limit %d)", ErrInvalidArgument, len(s), MaxQuoted)
	}
	return Quote(b.String())
}

// mustQuote quotes strings our own code built from validated parts.
func mustQuote(s string) string {
	q, err := Quote(s)
	if err != nil {
		panic("tmux: quoting an internal string: " + err.Error())
	}
	return q
}

// shellQuote quotes s for a POSIX shell: one single-quoted word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
