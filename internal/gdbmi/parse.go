package gdbmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxDepth bounds tuple/list nesting so hostile or corrupt input cannot
// exhaust the stack; maxValues bounds the values of one record, so a line
// of empty lists ("[[],[],...") cannot make the parser hold some thirty
// bytes of Value for every byte of input. gdb's largest records (a long
// backtrace, a disassembly, a register list) have a few thousand.
const (
	maxDepth  = 200
	maxValues = 1 << 18
)

// ParseError describes why a line is not valid MI output.
type ParseError struct {
	Pos int
	Msg string
}

func (e *ParseError) Error() string { return fmt.Sprintf("mi: %s at byte %d", e.Msg, e.Pos) }

// Parse parses one line of GDB/MI output (a trailing "\n" or "\r\n" is
// allowed).
func Parse(line string) (Record, error) {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	p := &parser{s: line}
	r, err := p.record()
	if err != nil {
		return Record{}, err
	}
	return r, nil
}

type parser struct {
	s      string
	pos    int
	values int
}

func (p *parser) fail(msg string, args ...any) error {
	return &ParseError{Pos: p.pos, Msg: fmt.Sprintf(msg, args...)}
}

func (p *parser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

// skip reads c if it is next, and says whether it was.
func (p *parser) skip(c byte) bool {
	if p.peek() == c {
		p.pos++
		return true
	}
	return false
}

// next reads what follows an element of a tuple or list: ',' before
// another, or end, the last; it says whether it was end.
func (p *parser) next(end byte, what string) (bool, error) {
	if p.skip(',') {
		return false, nil
	}
	if p.skip(end) {
		return true, nil
	}
	return false, p.fail("expected ',' or '%c' in %s", end, what)
}

func (p *parser) eof() bool { return p.pos >= len(p.s) }

func (p *parser) record() (Record, error) {
	if rest := strings.TrimRight(p.s, " "); rest == "(gdb)" {
		return Record{Kind: KindPrompt}, nil
	}
	var r Record
	start := p.pos
	for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
		p.pos++
	}
	r.Token = p.s[start:p.pos]
	if p.eof() {
		return Record{}, p.fail("empty record")
	}
	c := p.peek()
	p.pos++
	switch c {
	case '~', '@', '&':
		r.Kind = map[byte]RecordKind{'~': KindConsole, '@': KindTarget, '&': KindLog}[c]
		txt, err := p.cstring()
		if err != nil {
			return Record{}, err
		}
		if !p.eof() {
			return Record{}, p.fail("trailing bytes after stream record")
		}
		r.Text = txt
		return r, nil
	case '^', '*', '+', '=':
		r.Kind = map[byte]RecordKind{'^': KindResult, '*': KindExec, '+': KindStatus, '=': KindNotify}[c]
	default:
		return Record{}, p.fail("unexpected %q at start of record", c)
	}
	start = p.pos
	for !p.eof() && p.peek() != ',' {
		if !isNameByte(p.peek()) {
			return Record{}, p.fail("invalid byte %q in class", p.peek())
		}
		p.pos++
	}
	r.Class = p.s[start:p.pos]
	if r.Class == "" {
		return Record{}, p.fail("missing class")
	}
	for !p.eof() {
		if p.peek() != ',' {
			return Record{}, p.fail("expected ','")
		}
		p.pos++
		// element, not result: gdb's +download records carry a bare tuple.
		f, err := p.element(0)
		if err != nil {
			return Record{}, err
		}
		r.Results = append(r.Results, f)
	}
	return r, nil
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *parser) name() (string, error) {
	start := p.pos
	for !p.eof() && isNameByte(p.peek()) {
		p.pos++
	}
	if p.pos == start {
		return "", p.fail("expected a name")
	}
	return p.s[start:p.pos], nil
}

func (p *parser) result(depth int) (Field, error) {
	n, err := p.name()
	if err != nil {
		return Field{}, err
	}
	if p.peek() != '=' {
		return Field{}, p.fail("expected '=' after %q", n)
	}
	p.pos++
	v, err := p.value(depth)
	if err != nil {
		return Field{}, err
	}
	return Field{Name: n, Value: v}, nil
}

func (p *parser) value(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, p.fail("nesting deeper than %d", maxDepth)
	}
	if p.values++; p.values > maxValues {
		return Value{}, p.fail("more than %d values in one record", maxValues)
	}
	switch p.peek() {
	case '"':
		s, err := p.cstring()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: ValueConst, Const: s}, nil
	case '{':
		p.pos++
		v := Value{Kind: ValueTuple}
		for done := p.skip('}'); !done; {
			f, err := p.element(depth + 1)
			if err != nil {
				return Value{}, err
			}
			v.Fields = append(v.Fields, f)
			if done, err = p.next('}', "tuple"); err != nil {
				return Value{}, err
			}
		}
		return v, nil
	case '[':
		p.pos++
		v := Value{Kind: ValueList}
		for done := p.skip(']'); !done; {
			if p.peek() == '"' || p.peek() == '{' || p.peek() == '[' {
				if len(v.Fields) > 0 {
					return Value{}, p.fail("list mixes values and results")
				}
				it, err := p.value(depth + 1)
				if err != nil {
					return Value{}, err
				}
				v.Items = append(v.Items, it)
			} else {
				if len(v.Items) > 0 {
					return Value{}, p.fail("list mixes values and results")
				}
				f, err := p.result(depth + 1)
				if err != nil {
					return Value{}, err
				}
				v.Fields = append(v.Fields, f)
			}
			var err error
			if done, err = p.next(']', "list"); err != nil {
				return Value{}, err
			}
		}
		return v, nil
	}
	return Value{}, p.fail("expected a value")
}

// element is a tuple member: normally name=value, but gdb also emits bare
// values inside tuples in a few places, which we keep with an empty name.
func (p *parser) element(depth int) (Field, error) {
	if c := p.peek(); c == '"' || c == '{' || c == '[' {
		v, err := p.value(depth)
		return Field{Value: v}, err
	}
	return p.result(depth)
}

// cstring parses a C string starting at the opening quote.
func (p *parser) cstring() (string, error) {
	if p.peek() != '"' {
		return "", p.fail("expected '\"'")
	}
	p.pos++
	s, n, err := unquoteBody(p.s[p.pos:])
	p.pos += n
	if err != nil {
		return "", p.fail("%v", err)
	}
	return s, nil
}

// unquoteBody decodes a C string body up to and including its closing quote
// and returns the text and the number of bytes consumed.
func unquoteBody(s string) (string, int, error) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\':
			i++
			if i >= len(s) {
				return "", i, errors.New("unterminated escape")
			}
			e := s[i]
			i++
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case 'e':
				b.WriteByte(0x1b)
			case '\\', '"', '\'', '?':
				b.WriteByte(e)
			case '0', '1', '2', '3', '4', '5', '6', '7':
				v := int(e - '0')
				for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
					v = v*8 + int(s[i]-'0')
					i++
				}
				if v > 0xff {
					return "", i, errors.New("octal escape out of range")
				}
				b.WriteByte(byte(v))
			case 'x':
				start := i
				for i < len(s) && i-start < 2 && isHex(s[i]) {
					i++
				}
				if i == start {
					return "", i, errors.New("\\x without hex digits")
				}
				v, _ := strconv.ParseUint(s[start:i], 16, 8)
				b.WriteByte(byte(v))
			default:
				return "", i, fmt.Errorf("unknown escape \\%c", e)
			}
		case c == '\n' || c == '\r':
			return "", i, errors.New("newline inside C string")
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", i, errors.New("unterminated C string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
