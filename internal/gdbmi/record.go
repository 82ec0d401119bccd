package gdbmi

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
