package gdbmi

import "strings"

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
