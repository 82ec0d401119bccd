package gdbmi

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// hostileLocations and hostileExprs are agent strings that would make gdb
// run code or do more than asked. Every one must be refused.
var hostileLocations = []string{
	`main if $_shell("touch canary")`,
	`main if system("touch canary")`,
	`main thread 1`,
	`prog.c:10 if x++`,
	`$_shell("touch canary")`,
	`*system("touch canary")`,
	`*0x1000 + $_shell("x")`,
	`"a" ; shell touch canary`,
	"main\nshell touch canary",
	"main\r-interpreter-exec console \"shell touch canary\"",
	`main" -c "$_shell(\"touch canary\")`,
	`-source prog.c -line 3`,
	`-force-condition main`,
	`-c 1 main`,
	`prog.c:+3`,
	`prog.c:-1`,
	`+3`,
	`12`,
	`prog.c:0`,
	`prog.c:main:label`,
	`'prog.c'::main`,
	`main,`,
	`if`,
	`thread`,
	`prog.c:if`,
	`*0x`,
	`*0x12345678901234567`,
	`* 0x1000`,
	`*main`,
	`main ()`,
	`main()`,
	`ns::func`,
	`file.c:12 `,
	` main`,
	"main\x00",
	`prog.c :12`,
	// gdb's run-control and shell commands: as a location they are
	// refused unless they are a plain function name (see
	// TestCommandWordsStayNames).
	`shell id`, `!id`, `|id`, `!touch canary`, `|touch canary`, `run > canary`, `run; shell id`,
	"run\nshell id", "main\nrun", "main\rstart", `r id`, `start -- id`, `starti|id`, "run `touch canary`",
	`run $(touch canary)`, `r<canary`, `start&`, `main if $_shell("id")`,
	strings.Repeat("a", MaxLocationLen+1),
	strings.Repeat("a", 1<<20),
	"",
}

var goodLocations = []string{
	"main", "add", "_start", "prog.c:12", "src/prog.c:1", "/home/s/card/task4/prog.c:123456789",
	"prog.c:main", "start.S:_start", "*0x80000000", "*0X1f", "a.b.c:x_1", "my-file+v2.c:3",
	strings.Repeat("a", MaxLocationLen),
}

func TestParseLocation(t *testing.T) {
	for _, s := range hostileLocations {
		if l, err := ParseLocation(s); err == nil {
			t.Errorf("ParseLocation(%q) accepted %q", s, l)
		}
	}
	for _, s := range goodLocations {
		l, err := ParseLocation(s)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", s, err)
		} else if l.String() != s {
			t.Errorf("ParseLocation(%q) = %q", s, l)
		}
	}
}

var hostileExprs = []string{
	`$_shell("touch canary")`,
	`$_shell ("touch canary")`,
	`$_as_string(x)`,
	`$_gdb_setting_str("x")`,
	`system("touch canary")`,
	`system ( 0 )`,
	`x + f(1)`,
	`(f)(1)`,
	`(uint32_t)(x)`,
	`(*fp)(1)`,
	`fp[0](1)`,
	`arr[1](2)`,
	`s.fn(1)`,
	`p->fn(1)`,
	`$pc(1)`,
	`$1(2)`,
	`5(1)`,
	`'a'(1)`,
	`sizeof(x)(1)`,
	`sizeof(int)(1)`,
	`x=1`,
	`x = 1`,
	`x == 1 || (y = 2)`,
	`x+=1`, `x -= 1`, `x *= 2`, `x /= 2`, `x %= 2`, `x &= 1`, `x |= 1`, `x ^= 1`, `x <<= 1`, `x >>= 1`,
	`x++`, `++x`, `x--`, `--x`, `x--1`,
	`x, y`,
	`(x, system(0))`,
	`"a" ; shell touch canary`,
	`"abc"`,
	`x == "abc"`,
	`'\x41'`,
	`'ab'`,
	`' '`,
	"x\n-interpreter-exec console \"shell touch canary\"",
	"x\rshell touch canary",
	"x;shell touch canary",
	"x # comment",
	"`touch canary`",
	`x \ y`,
	`{1} + 1`,
	`{x} + 1`,
	`{x} (0x1000)`,
	`{x} - 1`,
	`{int, char} 1`,
	`new int`,
	`delete p`,
	`operator+`,
	`typeid(x)`,
	`static_cast<int>(x)`,
	`ns::x`,
	`'prog.c'::x`,
	`x ? y`,
	`x :`,
	`(x`,
	`x)`,
	`a[1`,
	`.5`,
	`1abc`,
	`0x`,
	`$$$`,
	`$a$b`,
	`$1x`,
	`p->*m`,
	`s.*m`,
	`zażółć`,
	`(int)`,
	`sizeof`,
	// gdb's run-control and shell commands. A bare word is only a
	// variable name, and `run > canary` a comparison (see
	// TestCommandWordsStayNames).
	`shell id`, `|id`, `|touch canary`, `!touch canary`, `run; shell id`, "run\nshell id",
	"x\nrun", "x\rstart", `r id`, `start -- id`, `starti id`, "run `touch canary`", `run $(touch canary)`,
	`start &`, `!`,
	`x @`,
	"",
	"   ",
	strings.Repeat("(", 200) + "x" + strings.Repeat(")", 200),
	strings.Repeat("x+", MaxExprLen),
	strings.Repeat("x", 1<<20),
}

var goodExprs = []string{
	"x", "$pc", "$sp", "$a0", "$x5", "$rip", "$eflags", "$1", "$", "$$", "$$2", "$_exitcode",
	"0", "0x80000000", "42u", "10UL", "1.5", "2.0e-3", "'a'", `'\n'`, `'\0'`,
	"arr[2]", "arr[i + 1] * 2", "s.field", "p->next->value", "*p", "&x", "-x", "!x", "~x", "- -x",
	"a + b * c - d / e % f", "a << 2 | b >> 1 & c ^ d", "a < b && c >= d || e != f", "a == b",
	"x ? y : z", "*arr@4", "arr[0]@3",
	"(int) x", "(unsigned long) $sp", "(char *) p", "(struct node *) p", "(const char *) $a0",
	"(uint32_t) x", "(uint32_t *) $sp", "*(uint32_t *) 0x80000000", "(int)(x + 1)", "(char)(x)",
	"{int} 0x80000000", "{uint32_t} $sp", "{struct node} p", "{int} (0x1000 + 4)", "{unsigned char} &x",
	"sizeof x", "sizeof(int)", "sizeof (struct node)", "sizeof(arr) / sizeof(arr[0])", "sizeof(uint32_t)",
	"(x)", "((x))", "(x) + 1", "(a)[1]", "x+1", "x -1", "a&&b", "a&b", "$_siginfo",
}

func TestParseSafeExpr(t *testing.T) {
	for _, s := range hostileExprs {
		if e, err := ParseSafeExpr(s); err == nil {
			t.Errorf("ParseSafeExpr(%q) accepted %q", s, e)
		}
	}
	for _, s := range goodExprs {
		e, err := ParseSafeExpr(s)
		if err != nil {
			t.Errorf("ParseSafeExpr(%q): %v", s, err)
			continue
		}
		if bad := exprOracle(e.String()); bad != "" {
			t.Errorf("ParseSafeExpr(%q) = %q: oracle says %s", s, e, bad)
		}
	}
	e, _ := ParseSafeExpr("p->next[i+1]")
	if e.String() != "p -> next [ i + 1 ]" {
		t.Errorf("canonical form: %q", e)
	}
}

// exprOracle independently checks an accepted expression's canonical text
// (tokens separated by single spaces) for calls and assignments. It
// returns "" when it finds neither.
func exprOracle(canon string) string {
	if len(canon) > 4*MaxExprLen {
		return "too long"
	}
	if strings.ContainsAny(canon, "\"\n\r\x00;`#\\,") && !isCharLiteralOnly(canon) {
		return "forbidden character"
	}
	toks := strings.Split(canon, " ")
	typeWords := map[string]bool{"void": true, "char": true, "short": true, "int": true, "long": true,
		"float": true, "double": true, "signed": true, "unsigned": true, "_Bool": true,
		"struct": true, "union": true, "enum": true}
	isName := func(s string) bool {
		return s != "" && (s[0] == '_' || s[0] == '$' || (s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z'))
	}
	// groupIsType: the tokens between the bracket closing at i and its
	// opener form a type name that cannot be a value.
	groupIsType := func(i int, open, close string) bool {
		depth, j := 0, i
		for ; j >= 0; j-- {
			if toks[j] == close {
				depth++
			} else if toks[j] == open {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j < 0 {
			return false
		}
		inner := toks[j+1 : i]
		if len(inner) == 0 {
			return false
		}
		sure := inner[len(inner)-1] == "*"
		for _, w := range inner {
			switch {
			case typeWords[w]:
				sure = true
			case w == "*" || w == "const" || w == "volatile":
			case isName(w) && w[0] != '$':
			default:
				return false
			}
		}
		return sure
	}
	for i, tk := range toks {
		switch tk {
		case "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=":
			return "assignment " + tk
		case "++", "--":
			return "increment " + tk
		}
		if strings.Contains(tk, "=") && tk != "==" && tk != "!=" && tk != "<=" && tk != ">=" {
			return "assignment inside " + tk
		}
		if tk != "(" || i == 0 {
			continue
		}
		prev := toks[i-1]
		switch {
		case prev == "sizeof":
		case prev == ")":
			if !groupIsType(i-1, "(", ")") {
				return "call after )"
			}
		case prev == "}":
			if !groupIsType(i-1, "{", "}") {
				return "call after }"
			}
		case prev == "]", isName(prev), prev[0] >= '0' && prev[0] <= '9', prev[0] == '\'':
			return "call after " + prev
		}
	}
	return ""
}

// isCharLiteralOnly allows the backslash of '\n'-style constants.
func isCharLiteralOnly(canon string) bool {
	for _, tk := range strings.Split(canon, " ") {
		if strings.ContainsAny(tk, "\"\n\r\x00;`#,") {
			return false
		}
		if strings.Contains(tk, `\`) && !(len(tk) == 4 && tk[0] == '\'' && tk[1] == '\\' && tk[3] == '\'') {
			return false
		}
	}
	return true
}

// commandWords are gdb commands that start a program (through the
// student's shell, with startup-with-shell) or run a shell. As agent text
// they are valid names, a function to break in or a variable to print, and
// must only ever reach gdb as such: a quoted -break-insert location, or the
// operand of `output` behind the fixed `with` prefix, never at the start of
// a console command.
var commandWords = []string{"run", "r", "start", "starti", "shell", "attach", "target", "python", "_shell"}

func TestCommandWordsStayNames(t *testing.T) {
	for _, w := range commandWords {
		loc, err := ParseLocation(w)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v (a function may have this name)", w, err)
			continue
		}
		if got, want := mustLine(t, BreakInsert(loc)), "7-break-insert \""+w+"\"\n"; got != want {
			t.Errorf("BreakInsert(%q) sends %q, want %q", w, got, want)
		}
	}
	for _, w := range append(commandWords, "!id", "!r", "run > canary", "r < canary", "-start", "*starti") {
		e, err := ParseSafeExpr(w)
		if err != nil {
			t.Errorf("ParseSafeExpr(%q): %v (a variable may have this name)", w, err)
			continue
		}
		got := mustLine(t, DataEvaluate(e))
		prefix := `7-interpreter-exec console "with language c -- with may-call-functions off -- output `
		if !strings.HasPrefix(got, prefix) || strings.Count(got, "\n") != 1 || strings.Count(got, `"`) != 2 {
			t.Errorf("DataEvaluate(%q) sends %q: the expression must stay output's operand", w, got)
		}
	}
}

func mustLine(t *testing.T, c Command) string {
	t.Helper()
	l, err := c.line("7")
	if err != nil {
		t.Fatalf("%s: %v", c.op, err)
	}
	return l
}

func TestOracleCatchesCalls(t *testing.T) {
	// The fuzz oracle must itself be able to fail.
	for _, s := range []string{"f ( 1 )", "( f ) ( 1 )", "$_shell ( x )", "a [ 1 ] ( 2 )", "x = 1", "x ++",
		"{ x } ( 1 )", "( uint32_t ) ( x )", "1 ( 2 )"} {
		if exprOracle(s) == "" {
			t.Errorf("oracle missed %q", s)
		}
	}
	for _, s := range []string{"( int ) ( x )", "( uint32_t * ) ( x )", "sizeof ( x )", "{ int } ( 1 )", "x == 1"} {
		if bad := exprOracle(s); bad != "" {
			t.Errorf("oracle refused %q: %s", s, bad)
		}
	}
}

func FuzzParseSafeExpr(f *testing.F) {
	for _, s := range append(append([]string{}, goodExprs...), hostileExprs[:len(hostileExprs)-3]...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseSafeExpr(s)
		if err != nil {
			return
		}
		if len(s) > MaxExprLen {
			t.Fatalf("accepted %d bytes", len(s))
		}
		if bad := exprOracle(e.String()); bad != "" {
			t.Fatalf("ParseSafeExpr(%q) accepted %q: %s", s, e, bad)
		}
		again, err := ParseSafeExpr(e.String())
		if err != nil || again != e {
			t.Fatalf("canonical form %q does not reparse to itself: %q %v", e, again, err)
		}
	})
}

func FuzzParseLocation(f *testing.F) {
	for _, s := range append(append([]string{}, goodLocations...), hostileLocations[:len(hostileLocations)-2]...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLocation(s)
		if err != nil {
			return
		}
		if l.String() != s || len(s) > MaxLocationLen || s == "" {
			t.Fatalf("ParseLocation(%q) = %q", s, l)
		}
		if strings.ContainsAny(s, " \t\n\r\x00\"'$(),;=<>!&|{}[]\\`#@~^%") || s[0] == '-' {
			t.Fatalf("ParseLocation(%q) accepted a forbidden character", s)
		}
		// Exactly one of the four forms.
		switch file, rest, found := strings.Cut(s, ":"); {
		case strings.HasPrefix(s, "*"):
			if !strings.HasPrefix(strings.ToLower(s), "*0x") || found {
				t.Fatalf("bad address form %q", s)
			}
		case !found:
			if strings.ContainsAny(s, "./+-*") || s == "if" || s == "thread" || s == "task" {
				t.Fatalf("bad function form %q", s)
			}
		default:
			if strings.Contains(rest, ":") || !strings.Contains(file, ".") || rest == "" || rest == "if" {
				t.Fatalf("bad file form %q", s)
			}
		}
	})
}

func TestSafeExprIntegers(t *testing.T) {
	for expr, want := range map[string][]uint64{
		"*(uint32_t *) 0x40070000":       {0x40070000},
		"{int} 0XD0000000UL":             {0xd0000000},
		"1073741824 + 010 + 0":           {1073741824, 8, 0},
		"((char *) 0x3fffffff)[1 + 2u]":  {0x3fffffff, 1, 2},
		"x + 1.5 + 'a' + $1 + sizeof(x)": nil,
		"arr[0x1e]":                      {0x1e},
		"*0x40070000@4":                  {0x40070000, 4},
		"0xffffffffffffffffff":           {math.MaxUint64},
		"x ? 0x50000000 : 0xdfffffff":    {0x50000000, 0xdfffffff},
		"(unsigned long) $sp + 0x100LL":  {0x100},
	} {
		e, err := ParseSafeExpr(expr)
		if err != nil {
			t.Errorf("ParseSafeExpr(%q): %v", expr, err)
			continue
		}
		if got := e.Integers(); !slices.Equal(got, want) {
			t.Errorf("Integers(%q) = %#x, want %#x", expr, got, want)
		}
	}
}

func TestLocationAddress(t *testing.T) {
	for loc, want := range map[string]uint64{"*0x40070000": 0x40070000, "*0XD0000000": 0xd0000000, "*0x0": 0} {
		l, err := ParseLocation(loc)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := l.Address(); !ok || got != want {
			t.Errorf("Address(%q) = %#x %v, want %#x", loc, got, ok, want)
		}
	}
	for _, loc := range []string{"main", "prog.c:12", "prog.c:main", "*0x12345678901234567"} {
		if l, err := ParseLocation(loc); err == nil {
			if a, ok := l.Address(); ok {
				t.Errorf("Address(%q) = %#x, want none", loc, a)
			}
		}
	}
}
