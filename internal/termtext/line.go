package termtext

import (
	"fmt"
	"strings"
)

// ellipsis marks text that Line cut.
const ellipsis = "…"

// Line returns s as one line of plain text for a terminal, a log or an
// error message: Sanitize first (no escape sequence, control or bidi
// override survives), then every run of white space, line breaks
// included, becomes one space, and the result is at most max bytes (cut
// at a rune boundary, the cut marked with "…"; max <= 0: no cap). Text
// that came from a container (a server's error, a pane title, a file or
// buffer name, a manifest value) goes through Line wherever stem prints
// it on one line, so it cannot move the cursor, retitle or clear the
// terminal, write the clipboard, or pass for a line of stem's own output.
func Line(s string, max int) string {
	clean, _ := Sanitize([]byte(s), Options{})
	out := strings.Join(strings.Fields(clean), " ")
	if max <= 0 || len(out) <= max {
		return out
	}
	if max < len(ellipsis) {
		return "" // no room for text and the mark
	}
	return Clip(out, max-len(ellipsis))
}

// MaxLogLine bounds one line that Logf passes on.
const MaxLogLine = 1000

// Logf wraps a printf-style logger so that every line is formatted first
// and then passed through Line (at most MaxLogLine bytes). It is the
// logger stem gives libraries whose log lines quote a peer (go-client logs
// the method names a Neovim server sends). A nil logf discards.
func Logf(logf func(format string, args ...any)) func(format string, args ...any) {
	return func(format string, args ...any) {
		if logf == nil {
			return
		}
		logf("%s", Line(fmt.Sprintf(format, args...), MaxLogLine))
	}
}
