package gdbmi

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/stem-edu/stem/internal/termtext"
)

// The assist level lets an agent place breakpoints and read state, but gdb
// will happily run code from inside a location or an expression: breakpoint
// conditions, calls to inferior functions, $_shell(...), assignments. The
// validators below accept a deliberately small grammar and hand back opaque
// values (Location, SafeExpr) that the command constructors require, so no
// unchecked agent text reaches gdb.

// MaxLocationLen and MaxExprLen bound validator input.
const (
	MaxLocationLen = 256
	MaxExprLen     = 256
)

// ValidationError says why agent input was refused.
type ValidationError struct {
	What   string // "location" or "expression"
	Input  string // truncated for display
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("refused %s %q: %s", e.What, e.Input, e.Reason)
}

func refuse(what, input, reason string, args ...any) error {
	return &ValidationError{What: what, Input: termtext.Clip(input, 60), Reason: fmt.Sprintf(reason, args...)}
}

// Location is a breakpoint location that passed ParseLocation.
type Location struct{ s string }

// String returns the location text.
func (l Location) String() string { return l.s }

var (
	identRE = `[A-Za-z_][A-Za-z0-9_]*`
	// A file name must end in an extension so "file:func" is not read as
	// gdb's "function:label" by accident, and may not start with '-' (gdb
	// would take it as an explicit-location option).
	fileRE     = `[A-Za-z0-9_/][A-Za-z0-9_.+/-]*\.[A-Za-z0-9]{1,8}`
	locationRE = regexp.MustCompile(`^(?:\*0[xX][0-9a-fA-F]{1,16}|` + identRE + `|` + fileRE + `:(?:[1-9][0-9]{0,8}|` + identRE + `))$`)
)

// Linespec words that change what a location means.
var locationKeywords = map[string]bool{"if": true, "thread": true, "task": true, "inferior": true, "-force-condition": true}

// ParseLocation accepts only `file.c:123`, `func`, `file.c:func` and
// `*0xADDR`: no conditions, spaces, quotes, offsets or explicit-location
// options.
func ParseLocation(s string) (Location, error) {
	const what = "location"
	if len(s) == 0 {
		return Location{}, refuse(what, s, "empty")
	}
	if len(s) > MaxLocationLen {
		return Location{}, refuse(what, s, "longer than %d bytes", MaxLocationLen)
	}
	if !locationRE.MatchString(s) {
		return Location{}, refuse(what, s, "want file.c:LINE, FUNCTION, file.c:FUNCTION or *0xADDRESS")
	}
	for _, part := range strings.Split(s, ":") {
		if locationKeywords[part] {
			return Location{}, refuse(what, s, "%q is a gdb keyword", part)
		}
	}
	return Location{s: s}, nil
}

// Address returns the address of a `*0xADDR` location.
func (l Location) Address() (uint64, bool) {
	rest, ok := strings.CutPrefix(l.s, "*")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 0, 64)
	if err != nil {
		return 0, false // more than 64 bits: gdb refuses it too
	}
	return n, true
}

// SafeExpr is a C expression that passed ParseSafeExpr. Its text is the
// canonical token sequence (tokens separated by single spaces), not the
// agent's original spelling, so what gdb sees is exactly what was checked.
type SafeExpr struct{ s string }

// String returns the canonical expression text.
func (e SafeExpr) String() string { return e.s }

// Integers returns the expression's integer constants (decimal, octal or
// hex, suffixes dropped), in order; one too large for 64 bits is
// math.MaxUint64. Character and floating constants are not included.
func (e SafeExpr) Integers() []uint64 {
	var out []uint64
	for _, tk := range strings.Fields(e.s) {
		if tk[0] < '0' || tk[0] > '9' || strings.ContainsAny(tk, ".eE") && !strings.HasPrefix(strings.ToLower(tk), "0x") {
			continue
		}
		digits := strings.TrimRight(tk, "uUlL")
		base := 10
		switch {
		case len(digits) > 1 && (digits[1] == 'x' || digits[1] == 'X'):
			digits, base = digits[2:], 16
		case len(digits) > 1 && digits[0] == '0':
			base = 8
		}
		n, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			n = math.MaxUint64
		}
		out = append(out, n)
	}
	return out
}
