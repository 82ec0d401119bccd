package gdbmi

import (
	"fmt"
	"strings"
)

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
