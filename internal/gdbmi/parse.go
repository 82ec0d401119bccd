package gdbmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RecordKind classifies one line of GDB/MI output.
type RecordKind int

// Record kinds, named after the GDB/MI output grammar.
const (
	KindResult  RecordKind = iota + 1 // ^done, ^running, ^connected, ^error, ^exit
	KindExec                          // *stopped, *running
	KindStatus                        // +download ...
	KindNotify                        // =thread-created, =breakpoint-modified ...
	KindConsole                       // ~"text"
	KindTarget                        // @"text"
	KindLog                           // &"text"
	KindPrompt                        // (gdb)
)

func (k RecordKind) String() string {
	switch k {
	case KindResult:
		return "result"
	case KindExec:
		return "exec"
	case KindStatus:
		return "status"
	case KindNotify:
		return "notify"
	case KindConsole:
		return "console"
	case KindTarget:
		return "target"
	case KindLog:
		return "log"
	case KindPrompt:
		return "prompt"
	}
	return "unknown"
}

// prefix returns the record's leading character in MI syntax.
func (k RecordKind) prefix() byte {
	switch k {
	case KindResult:
		return '^'
	case KindExec:
		return '*'
	case KindStatus:
		return '+'
	case KindNotify:
		return '='
	case KindConsole:
		return '~'
	case KindTarget:
		return '@'
	case KindLog:
		return '&'
	}
	return '?'

}

// Record is one parsed line of MI output.
type Record struct {
	Kind RecordKind
	// Token is the record's decimal token, "" when it has none. gdb puts
	// tokens on result records; the bridge also puts the asking client's
	// token on the stream records a command produced (an extension of the
	// MI grammar, which Parse accepts).
	Token   string
	Class   string  // result or async class: "done", "stopped", "thread-created"...
	Results []Field // the comma-separated results of a result or async record
	Text    string  // the decoded text of a stream record
}

// ValueKind is the shape of an MI value.
type ValueKind int

// Value kinds.
const (
	ValueConst ValueKind = iota + 1 // "c-string"
	ValueTuple                      // {a="1",b="2"}
	ValueList                       // [] or ["a","b"] or [frame={...},frame={...}]
)

// Value is an MI value. A tuple keeps Fields; a list keeps either Items
// (a list of values) or Fields (a list of results), never both.
type Value struct {
	Kind   ValueKind
	Const  string
	Fields []Field
	Items  []Value
}

// Field is a name=value pair. Name is "" only for the unnamed elements gdb
// sometimes puts in tuples (for example breakpoint scripts in MI2).
type Field struct {
	Name  string
	Value Value
}

// Get returns the first field called name.
func (r Record) Get(name string) (Value, bool) { return getField(r.Results, name) }

// Str returns the constant field called name, or "".
func (r Record) Str(name string) string {
	v, _ := r.Get(name)
	return v.Const
}

// Get returns the first field called name of a tuple or list of results.
func (v Value) Get(name string) (Value, bool) { return getField(v.Fields, name) }

// Str returns the constant field called name, or "".
func (v Value) Str(name string) string {
	f, _ := v.Get(name)
	return f.Const
}

// Elems returns the elements of a list whatever its form: the values of a
// list of values, or the values of a list of results.
func (v Value) Elems() []Value {
	if len(v.Items) > 0 {
		return v.Items
	}
	out := make([]Value, 0, len(v.Fields))
	for _, f := range v.Fields {
		out = append(out, f.Value)
	}
	return out
}

func getField(fs []Field, name string) (Value, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f.Value, true
		}
	}
	return Value{}, false
}

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
		if p.peek() == '}' {
			p.pos++
			return v, nil
		}
		for {
			f, err := p.element(depth + 1)
			if err != nil {
				return Value{}, err
			}
			v.Fields = append(v.Fields, f)
			switch p.peek() {
			case ',':
				p.pos++
			case '}':
				p.pos++
				return v, nil
			default:
				return Value{}, p.fail("expected ',' or '}' in tuple")
			}
		}
	case '[':
		p.pos++
		v := Value{Kind: ValueList}
		if p.peek() == ']' {
			p.pos++
			return v, nil
		}
		for {
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
			switch p.peek() {
			case ',':
				p.pos++
			case ']':
				p.pos++
				return v, nil
			default:
				return Value{}, p.fail("expected ',' or ']' in list")
			}
		}
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

// Quote encodes s as an MI C string that both gdb's MI input parser and
// Parse decode back to s: quote, backslash and control bytes are escaped
// (control bytes as three-digit octal), everything else is copied. The
// result never contains a raw newline, so it cannot end a command line.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Format renders a record in MI syntax; Parse(Format(r)) equals r.
func Format(r Record) string {
	var b strings.Builder
	switch r.Kind {
	case KindPrompt:
		return "(gdb) "
	case KindConsole, KindTarget, KindLog:
		b.WriteString(r.Token)
		b.WriteByte(r.Kind.prefix())
		b.WriteString(Quote(r.Text))
		return b.String()
	}
	b.WriteString(r.Token)
	b.WriteByte(r.Kind.prefix())
	b.WriteString(r.Class)
	for _, f := range r.Results {
		b.WriteByte(',')
		formatField(&b, f)
	}
	return b.String()
}

// String renders the value in MI syntax.
func (v Value) String() string {
	var b strings.Builder
	formatValue(&b, v)
	return b.String()
}

func formatField(b *strings.Builder, f Field) {
	if f.Name != "" {
		b.WriteString(f.Name)
		b.WriteByte('=')
	}
	formatValue(b, f.Value)
}

func formatValue(b *strings.Builder, v Value) {
	switch v.Kind {
	case ValueTuple:
		b.WriteByte('{')
		for i, f := range v.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			formatField(b, f)
		}
		b.WriteByte('}')
	case ValueList:
		b.WriteByte('[')
		for i, it := range v.Items {
			if i > 0 {
				b.WriteByte(',')
			}
			formatValue(b, it)
		}
		for i, f := range v.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			formatField(b, f)
		}
		b.WriteByte(']')
	default:
		b.WriteString(Quote(v.Const))
	}
}
