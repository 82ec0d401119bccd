package gdbmi

import (
	"reflect"
	"strings"
	"testing"
)

// Lines captured from gdb 13.1 and gdb-multiarch (new-ui mi3).
var realLines = []string{
	`=thread-group-added,id="i1"`,
	`(gdb) `,
	`2^done,bkpt={number="1",type="breakpoint",disp="keep",enabled="y",addr="0x000000000000115b",func="main",file="prog.c",fullname="/tmp/exp/prog.c",line="5",thread-groups=["i1"],times="0",original-location="main"}`,
	`^running`,
	`*running,thread-id="all"`,
	`~"Breakpoint 1, main () at prog.c:5\n"`,
	`~"5\t  int x = 1;\n"`,
	`*stopped,reason="breakpoint-hit",disp="keep",bkptno="1",frame={addr="0x000055555555515b",func="main",args=[],file="prog.c",fullname="/tmp/exp/prog.c",line="5",arch="i386:x86-64"},thread-id="1",stopped-threads="all",core="0"`,
	`*stopped,reason="exited",exit-code="011"`,
	`=thread-group-exited,id="i1",exit-code="011"`,
	`3^done,stack=[frame={level="0",addr="0x0000555555555143",func="add",file="prog.c",fullname="/tmp/exp/prog.c",line="3",arch="i386:x86-64"},frame={level="1",addr="0x000055555555518d",func="main",file="prog.c",fullname="/tmp/exp/prog.c",line="7",arch="i386:x86-64"}]`,
	`4^done,variables=[{name="x",type="int",value="1"},{name="arr",type="int [4]"}]`,
	`8^error,msg="No symbol \"x\" in current context."`,
	`&"Cannot call functions in the program: may-call-functions is off.\n"`,
	`5^done,register-values=[{number="0",value="0x0"},{number="1",value="0x8000000c"}]`,
	`*stopped,frame={addr="0x00001000",func="??",args=[],arch="riscv:rv32"},thread-id="1",stopped-threads="all"`,
	`=thread-selected,id="1",frame={level="1",addr="0x000055555555518d",func="main",args=[],file="prog.c",fullname="/tmp/exp/prog.c",line="7",arch="i386:x86-64"}`,
	`~"\nProgram"`,
	`*stopped,reason="signal-received",signal-name="SIGINT",signal-meaning="Interrupt",frame={addr="0x00005555555551a9",func="main",args=[],file="prog.c",fullname="/tmp/exp/prog.c",line="9",arch="i386:x86-64"},thread-id="1",stopped-threads="all",core="1"`,
	`+download,{section=".text",section-size="6668",total-size="9880"}`,
	`^done,BreakpointTable={nr_rows="1",nr_cols="6",hdr=[{width="7",alignment="-1",col_name="number",colhdr="Num"}],body=[bkpt={number="1",script={"silent","bt"}}]}`,
}

func TestParseRealLines(t *testing.T) {
	for _, l := range realLines {
		r, err := Parse(l)
		if err != nil {
			t.Errorf("Parse(%q): %v", l, err)
			continue
		}
		back, err := Parse(Format(r))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("round trip of %q: got %q (%v)", l, Format(r), err)
		}
	}
}

func TestParseDetails(t *testing.T) {
	r, err := Parse(realLines[7] + "\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindExec || r.Class != "stopped" || r.Str("reason") != "breakpoint-hit" || r.Str("bkptno") != "1" {
		t.Fatalf("stopped record: %+v", r)
	}
	f, _ := r.Get("frame")
	if f.Kind != ValueTuple || f.Str("func") != "main" || f.Str("line") != "5" {
		t.Fatalf("frame: %+v", f)
	}
	args, _ := f.Get("args")
	if args.Kind != ValueList || len(args.Elems()) != 0 {
		t.Fatalf("args: %+v", args)
	}

	r, _ = Parse(realLines[2])
	if r.Token != "2" || r.Kind != KindResult || r.Class != "done" {
		t.Fatalf("result: %+v", r)
	}
	b, _ := r.Get("bkpt")
	tg, _ := b.Get("thread-groups")
	if len(tg.Items) != 1 || tg.Items[0].Const != "i1" {
		t.Fatalf("thread-groups: %+v", tg)
	}

	r, _ = Parse(realLines[10])
	st, _ := r.Get("stack")
	if len(st.Fields) != 2 || st.Fields[1].Name != "frame" || st.Elems()[1].Str("func") != "main" {
		t.Fatalf("stack: %+v", st)
	}

	r, _ = Parse(realLines[12])
	if r.Str("msg") != `No symbol "x" in current context.` {
		t.Fatalf("msg: %q", r.Str("msg"))
	}
	r, _ = Parse(realLines[6])
	if r.Kind != KindConsole || r.Text != "5\t  int x = 1;\n" {
		t.Fatalf("stream: %+v", r)
	}
	if r, _ := Parse(`12~"owned"`); r.Kind != KindConsole || r.Token != "12" || r.Text != "owned" {
		t.Fatalf("tokened stream (bridge extension): %+v", r)
	}
	if r, _ := Parse(`(gdb)`); r.Kind != KindPrompt {
		t.Fatalf("prompt: %+v", r)
	}
	r, _ = Parse(realLines[20])
	body, _ := r.Get("BreakpointTable")
	bk, _ := body.Get("body")
	script, _ := bk.Elems()[0].Get("script")
	if len(script.Fields) != 2 || script.Fields[0].Name != "" || script.Fields[1].Value.Const != "bt" {
		t.Fatalf("tuple of bare values: %+v", script)
	}
}

func TestCStringEscapes(t *testing.T) {
	cases := map[string]string{
		`~"a\nb\tc\\d\"e"`:          "a\nb\tc\\d\"e",
		`~"\a\b\f\v\r\e\'\?"`:       "\a\b\f\v\r\x1b'?",
		`~"\000\1\12\123\1234"`:     "\x00\x01\x0a\x53\x534",
		`~"\x41\x4a\x4Bz\x7"`:       "AJKz\x07",
		`~"caf\303\251 \377"`:       "caf\u00e9 \xff",
		`~""`:                       "",
		`~"raw UTF-8: zażółć"`:      "raw UTF-8: zażółć",
		`~"tab\there"`:              "tab\there",
		`~"quote at end\""`:         `quote at end"`,
		`~"backslash at end\\"`:     `backslash at end\`,
		`~"octal then digit \0619"`: "octal then digit 19",
	}
	for in, want := range cases {
		r, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if r.Text != want {
			t.Errorf("Parse(%q) = %q, want %q", in, r.Text, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	bad := []string{
		``, `12`, `abc`, `^`, `^done,`, `^done,x`, `^done,x=`, `^done,x="1"junk`,
		`~"unterminated`, `~"bad escape \q"`, `~"\x"`, `~"\400"`, `12(gdb)`,
		`^done,x={a="1"`, `^done,x=[a="1","b"]`, `^done,x=["b",a="1"]`, `^done,x={a="1",}`,
		`^done,x=[` + strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300) + `]`,
		`~"a" trailing`, `^do ne`, `*stopped,=`, "~\"new\nline\"",
	}
	for _, b := range bad {
		if r, err := Parse(b); err == nil {
			t.Errorf("Parse(%q) accepted: %+v", b, r)
		}
	}
}

func TestQuote(t *testing.T) {
	cases := map[string]string{
		"plain":             `"plain"`,
		`a"b\c`:             `"a\"b\\c"`,
		"l1\nl2\r\t":        `"l1\nl2\r\t"`,
		"\x00\x1b\x7f":      `"\000\033\177"`,
		"zażółć":            `"zażółć"`,
		`shell touch "x"`:   `"shell touch \"x\""`,
		`\" ; -gdb-exit \"`: `"\\\" ; -gdb-exit \\\""`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, l := range realLines {
		f.Add(l)
	}
	f.Add(`~"\x41\101\e"`)
	f.Add(`^done,a={b=[c={}],d=[]}`)
	f.Add(`*stopped,x=[[],[],[[[{}]]],{a=[]}]`)
	f.Add(`^done,x=` + strings.Repeat("[", maxDepth+1))
	f.Fuzz(func(t *testing.T, line string) {
		r, err := Parse(line)
		if err != nil {
			return
		}
		out := Format(r)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Format(Parse(%q)) = %q does not parse: %v", line, out, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip changed %q:\n%+v\n%+v", line, r, back)
		}
		if strings.ContainsAny(out, "\n\r") {
			t.Fatalf("Format produced a line break: %q", out)
		}
	})
}

func FuzzQuote(f *testing.F) {
	f.Add("shell touch canary")
	f.Add("a\"\n-interpreter-exec console \"shell x\"")
	f.Add("\x00\xff\\")
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if strings.ContainsAny(q, "\n\r\x00") {
			t.Fatalf("Quote(%q) = %q contains a raw line break or NUL", s, q)
		}
		r, err := Parse("~" + q)
		if err != nil {
			t.Fatalf("Quote(%q) = %s does not parse: %v", s, q, err)
		}
		if r.Text != s {
			t.Fatalf("Quote round trip: %q -> %s -> %q", s, q, r.Text)
		}
	})
}
