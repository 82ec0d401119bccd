package gdbmi

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
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
	if len(input) > 60 {
		input = input[:60] + "..."
	}
	return &ValidationError{What: what, Input: input, Reason: fmt.Sprintf(reason, args...)}
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

type tokKind int

const (
	tIdent tokKind = iota + 1
	tKeyword
	tDollar
	tNumber
	tChar
	tPunct
)

type token struct {
	kind tokKind
	text string
}

// Type words of C; a cast containing one is unambiguously a cast.
var typeKeywords = map[string]bool{
	"void": true, "char": true, "short": true, "int": true, "long": true, "float": true,
	"double": true, "signed": true, "unsigned": true, "_Bool": true,
}

var qualifierKeywords = map[string]bool{"const": true, "volatile": true}

var tagKeywords = map[string]bool{"struct": true, "union": true, "enum": true}

// Words refused outright: C++ operators that allocate or run code in the
// inferior when the student's language is C++, and statement keywords that
// have no place in an expression.
var forbiddenWords = map[string]bool{
	"new": true, "delete": true, "operator": true, "typeid": true, "throw": true,
	"dynamic_cast": true, "static_cast": true, "reinterpret_cast": true, "const_cast": true,
	"template": true, "typename": true, "class": true, "namespace": true,
	"if": true, "else": true, "while": true, "for": true, "do": true, "return": true,
	"goto": true, "switch": true, "case": true, "default": true,
}

// Punctuators we accept, longest first for greedy lexing. Assignment
// operators, ++/--, ',' and '::' are not here and are refused by the lexer.
var punctuators = []string{
	"<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->",
	"(", ")", "[", "]", "{", "}", ".", "*", "&", "-", "+", "!", "~", "/", "%",
	"<", ">", "^", "|", "?", ":", "@",
}

// Multi-character operators we name in errors rather than mis-lexing.
var refusedOperators = []struct{ op, why string }{
	{"<<=", "assignment"}, {">>=", "assignment"}, {"++", "increment"}, {"--", "decrement"},
	{"+=", "assignment"}, {"-=", "assignment"}, {"*=", "assignment"}, {"/=", "assignment"},
	{"%=", "assignment"}, {"&=", "assignment"}, {"|=", "assignment"}, {"^=", "assignment"},
	{"::", "scope operator"}, {"->*", "member pointer"}, {".*", "member pointer"},
}

func lexExpr(s string) ([]token, error) {
	const what = "expression"
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			w := s[i:j]
			switch {
			case forbiddenWords[w]:
				return nil, refuse(what, s, "%q is not allowed", w)
			case w == "sizeof" || typeKeywords[w] || qualifierKeywords[w] || tagKeywords[w]:
				toks = append(toks, token{tKeyword, w})
			default:
				toks = append(toks, token{tIdent, w})
			}
			i = j
		case c == '$':
			// $reg, $convenience, $N (history), $, $$, $$N.
			j := i + 1
			if j < len(s) && s[j] == '$' {
				j++
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			} else if j < len(s) && s[j] >= '0' && s[j] <= '9' {
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			} else {
				for j < len(s) && isIdentByte(s[j]) {
					j++
				}
			}
			if j < len(s) && (s[j] == '$' || isIdentByte(s[j])) {
				return nil, refuse(what, s, "malformed $ name")
			}
			toks = append(toks, token{tDollar, s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			n := lexNumber(s[i:])
			if n == 0 {
				return nil, refuse(what, s, "malformed number")
			}
			toks = append(toks, token{tNumber, s[i : i+n]})
			i += n
		case c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			return nil, refuse(what, s, "write floating constants with a leading digit")
		case c == '\'':
			n := lexChar(s[i:])
			if n == 0 {
				return nil, refuse(what, s, "only simple character constants like 'a' or '\\n' are allowed")
			}
			toks = append(toks, token{tChar, s[i : i+n]})
			i += n
		default:
			for _, r := range refusedOperators {
				if strings.HasPrefix(s[i:], r.op) {
					return nil, refuse(what, s, "%s (%s) is not allowed", r.why, r.op)
				}
			}
			matched := ""
			for _, p := range punctuators {
				if strings.HasPrefix(s[i:], p) {
					matched = p
					break
				}
			}
			if matched == "" {
				switch c {
				case '=':
					return nil, refuse(what, s, "assignment (=) is not allowed")
				case ',':
					return nil, refuse(what, s, "the comma operator is not allowed")
				case '"':
					return nil, refuse(what, s, "string literals are not allowed")
				}
				return nil, refuse(what, s, "character %q is not allowed", c)
			}
			// A lone '=' is no punctuator, so "a < = b" is refused above
			// rather than read as "<=".
			toks = append(toks, token{tPunct, matched})
			i += len(matched)
		}
	}
	return toks, nil
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isIdentByte(c byte) bool  { return isIdentStart(c) || (c >= '0' && c <= '9') }

// lexNumber returns the length of an integer (decimal, octal, hex) or
// simple floating constant at the start of s, or 0 if it is malformed.
func lexNumber(s string) int {
	i := 0
	if len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		i = 2
		for i < len(s) && isHex(s[i]) {
			i++
		}
		if i == 2 {
			return 0
		}
	} else {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i < len(s) && s[i] == '.' {
			i++
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
				i++
				if i < len(s) && (s[i] == '+' || s[i] == '-') {
					i++
				}
				d := i
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					i++
				}
				if i == d {
					return 0
				}
			}
			if i < len(s) && isIdentByte(s[i]) {
				return 0
			}
			return i
		}
	}
	// Integer suffixes: u, l, ul, ll, ull in any case.
	for k := 0; k < 3 && i < len(s) && strings.IndexByte("uUlL", s[i]) >= 0; k++ {
		i++
	}
	if i < len(s) && (isIdentByte(s[i]) || s[i] == '.') {
		return 0
	}
	return i
}

// lexChar returns the length of a plain character constant: a printable
// non-space character other than quotes, backslash and the characters that
// separate commands or start comments elsewhere in gdb, or one of a few
// escapes.
func lexChar(s string) int {
	if len(s) >= 3 && s[1] > ' ' && s[1] < 0x7f && strings.IndexByte("'\\\"`;#,", s[1]) < 0 && s[2] == '\'' {
		return 3
	}
	if len(s) >= 4 && s[1] == '\\' && strings.IndexByte(`nrt0\'`, s[2]) >= 0 && s[3] == '\'' {
		return 4
	}
	return 0
}

// exprParser is a recursive-descent parser over gdb's C expression grammar
// (precedence as in gdb's c-exp.y) restricted to side-effect-free forms.
type exprParser struct {
	src   string
	toks  []token
	pos   int
	depth int
}

const maxExprDepth = 64

// ParseSafeExpr accepts a C expression that reads program state: names,
// registers and other $ values, numbers, member access, indexing, unary and
// binary operators, ?:, casts to simple types, sizeof, a@n and {type} addr.
// It refuses function calls (including $function(...)), assignments,
// increments, the comma operator, string literals and anything over
// MaxExprLen bytes.
func ParseSafeExpr(s string) (SafeExpr, error) {
	const what = "expression"
	if len(s) > MaxExprLen {
		return SafeExpr{}, refuse(what, s, "longer than %d bytes", MaxExprLen)
	}
	toks, err := lexExpr(s)
	if err != nil {
		return SafeExpr{}, err
	}
	if len(toks) == 0 {
		return SafeExpr{}, refuse(what, s, "empty")
	}
	p := &exprParser{src: s, toks: toks}
	if err := p.expr(); err != nil {
		return SafeExpr{}, err
	}
	if p.pos != len(p.toks) {
		return SafeExpr{}, p.fail("unexpected %q", p.toks[p.pos].text)
	}
	parts := make([]string, len(toks))
	for i, t := range toks {
		parts[i] = t.text
	}
	return SafeExpr{s: strings.Join(parts, " ")}, nil
}

func (p *exprParser) fail(reason string, args ...any) error {
	return refuse("expression", p.src, reason, args...)
}

func (p *exprParser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{}
}

func (p *exprParser) is(text string) bool {
	t := p.peek()
	return (t.kind == tPunct || t.kind == tKeyword) && t.text == text
}

func (p *exprParser) expect(text string) error {
	if !p.is(text) {
		if p.pos >= len(p.toks) {
			return p.fail("expected %q at end", text)
		}
		return p.fail("expected %q, found %q", text, p.peek().text)
	}
	p.pos++
	return nil
}

func (p *exprParser) enter() error {
	p.depth++
	if p.depth > maxExprDepth {
		return p.fail("nested deeper than %d", maxExprDepth)
	}
	return nil
}

func (p *exprParser) expr() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	if err := p.binary(0); err != nil {
		return err
	}
	if p.is("?") {
		p.pos++
		if err := p.expr(); err != nil {
			return err
		}
		if err := p.expect(":"); err != nil {
			return err
		}
		return p.expr()
	}
	return nil
}

// Binary precedence levels, loosest first (gdb's c-exp.y order; '@' sits
// between shifts and additive operators).
var binaryLevels = [][]string{
	{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", ">", "<=", ">="},
	{"<<", ">>"}, {"@"}, {"+", "-"}, {"*", "/", "%"},
}

func (p *exprParser) binary(level int) error {
	if level == len(binaryLevels) {
		return p.unary()
	}
	if err := p.binary(level + 1); err != nil {
		return err
	}
	for {
		t := p.peek()
		if t.kind != tPunct || !contains(binaryLevels[level], t.text) {
			return nil
		}
		p.pos++
		if err := p.binary(level + 1); err != nil {
			return err
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *exprParser) unary() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	t := p.peek()
	switch {
	case t.kind == tPunct && contains([]string{"-", "+", "!", "~", "*", "&"}, t.text):
		p.pos++
		return p.unary()
	case t.kind == tKeyword && t.text == "sizeof":
		p.pos++
		if p.is("(") {
			if end, sure := p.typeNameAt(p.pos + 1); sure && p.tokIs(end, ")") {
				p.pos = end + 1
				return p.noCall()
			}
		}
		return p.unary()
	case p.is("{"):
		// gdb reads "{x}" as an array literal when x is not a type, and
		// using such an array as a pointer copies it into the inferior by
		// calling malloc there. A lone name in braces is therefore only
		// accepted where the next token cannot continue an expression.
		end, sure := p.typeNameAt(p.pos + 1)
		if end < 0 || !p.tokIs(end, "}") {
			return p.fail("expected a type name inside { }")
		}
		p.pos = end + 1
		if !sure && !startsOperand(p.peek()) {
			return p.fail("write {type} address with a plain address or name after it, or use a cast like *(type *) address")
		}
		return p.unary()
	case p.is("("):
		if end, sure := p.typeNameAt(p.pos + 1); sure && p.tokIs(end, ")") {
			p.pos = end + 1
			return p.unary()
		}
	}
	return p.postfix()
}

func (p *exprParser) tokIs(i int, text string) bool {
	return i >= 0 && i < len(p.toks) && p.toks[i].kind == tPunct && p.toks[i].text == text
}

// typeNameAt tries to read a type name starting at token i and returns the
// index just past it (-1 if there is none) and whether it is certainly a
// type: a lone identifier may be a variable as easily as a typedef.
func (p *exprParser) typeNameAt(i int) (int, bool) {
	tok := func(k int) token {
		if k < len(p.toks) {
			return p.toks[k]
		}
		return token{}
	}
	for tok(i).kind == tKeyword && qualifierKeywords[tok(i).text] {
		i++
	}
	sure := false
	switch t := tok(i); {
	case t.kind == tKeyword && tagKeywords[t.text]:
		if tok(i+1).kind != tIdent {
			return -1, false
		}
		i += 2
		sure = true
	case t.kind == tKeyword && typeKeywords[t.text]:
		for (tok(i).kind == tKeyword) && (typeKeywords[tok(i).text] || qualifierKeywords[tok(i).text]) {
			i++
		}
		sure = true
	case t.kind == tIdent:
		i++
	default:
		return -1, false
	}
	for tok(i).kind == tKeyword && qualifierKeywords[tok(i).text] {
		i++
	}
	for tok(i).kind == tPunct && tok(i).text == "*" {
		sure = true
		i++
		for tok(i).kind == tKeyword && qualifierKeywords[tok(i).text] {
			i++
		}
	}
	return i, sure
}

// noCall refuses a '(' right after an operand: that is a function call.
func (p *exprParser) noCall() error {
	if p.is("(") {
		return p.fail("function calls are not allowed")
	}
	return nil
}

func (p *exprParser) postfix() error {
	if err := p.primary(); err != nil {
		return err
	}
	for {
		switch {
		case p.is("("):
			return p.fail("function calls are not allowed")
		case p.is("["):
			p.pos++
			if err := p.expr(); err != nil {
				return err
			}
			if err := p.expect("]"); err != nil {
				return err
			}
		case p.is(".") || p.is("->"):
			p.pos++
			if p.peek().kind != tIdent {
				return p.fail("expected a member name")
			}
			p.pos++
		default:
			return nil
		}
	}
}

func (p *exprParser) primary() error {
	t := p.peek()
	switch t.kind {
	case tIdent, tDollar, tNumber, tChar:
		p.pos++
		return nil
	case tPunct:
		if t.text != "(" {
			break
		}
		start := p.pos
		p.pos++
		if err := p.expr(); err != nil {
			return err
		}
		if err := p.expect(")"); err != nil {
			return err
		}
		// "(name) operand" is a cast to a typedef: the operand cannot be
		// read as the right side of a binary operator. A '(' here would be a
		// call of (name) and is refused by postfix.
		if p.pos-start == 3 && p.toks[start+1].kind == tIdent && startsOperand(p.peek()) {
			return p.unary()
		}
		return nil
	case 0:
		return p.fail("unexpected end")
	}
	return p.fail("unexpected %q", t.text)
}

// startsOperand reports tokens that can begin an operand but never continue
// an expression as a binary or postfix operator.
func startsOperand(t token) bool {
	switch t.kind {
	case tIdent, tDollar, tNumber, tChar:
		return true
	case tKeyword:
		return t.text == "sizeof"
	case tPunct:
		return t.text == "!" || t.text == "~" || t.text == "{"
	}
	return false
}
