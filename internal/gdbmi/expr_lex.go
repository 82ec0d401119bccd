package gdbmi

import "strings"

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
