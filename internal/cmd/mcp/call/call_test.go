package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		name  string
		pairs []string
		raw   string
		want  string // the argument object as canonical JSON; "" when an error is wanted
		err   string // part of the error message
	}{
		{name: "none", want: `{}`},
		{name: "types", pairs: []string{"n=5", "neg=-3", "f=2.5", "e=1e3", "t=true", "no=false", "s=hello", "empty="},
			want: `{"e":1e3,"empty":"","f":2.5,"n":5,"neg":-3,"no":false,"s":"hello","t":true}`},
		// Only exact JSON-ish forms are typed; everything else is the text.
		{name: "strings that are not JSON numbers", pairs: []string{"a=Inf", "b=NaN", "c=0x10", "d=+1", "e=True", "f=1.", "g=%0", "h=.5", "i=007", "j= 5", "k=5 ", "l=-"},
			want: `{"a":"Inf","b":"NaN","c":"0x10","d":"+1","e":"True","f":"1.","g":"%0","h":".5","i":"007","j":" 5","k":"5 ","l":"-"}`},
		{name: "big integer keeps its digits", pairs: []string{"id:=12345678901234567890", "x=12345678901234567890"},
			want: `{"id":12345678901234567890,"x":12345678901234567890}`},
		// The shell has already removed its quotes: quotes that reach us are text.
		{name: "quotes are literal in NAME=VALUE", pairs: []string{`q="5"`, `r='x'`}, want: `{"q":"\"5\"","r":"'x'"}`},
		{name: "a JSON string forces text", pairs: []string{`n:="5"`, `b:="true"`}, want: `{"b":"true","n":"5"}`},
		{name: "JSON values", pairs: []string{`lines:=["int x = 1;", "y"]`, `o:={"k":[1,null]}`, "z:=null", "w:= 7 "},
			want: `{"lines":["int x = 1;","y"],"o":{"k":[1,null]},"w":7,"z":null}`},
		{name: "= in the value", pairs: []string{"expr=a==b", "pattern=x=1", "eq=="}, want: `{"eq":"=","expr":"a==b","pattern":"x=1"}`},
		// := after an = belongs to the value, not the operator.
		{name: ":= in a NAME=VALUE value", pairs: []string{"a=b:=c"}, want: `{"a":"b:=c"}`},
		{name: "= in a JSON value", pairs: []string{`m:={"a=b":"c=d"}`}, want: `{"m":{"a=b":"c=d"}}`},
		{name: "colon in a name", pairs: []string{"a:b=1"}, want: `{"a:b":1}`},
		{name: "--args", raw: `{"pane":"%0","start":-20,"big":12345678901234567890}`, want: `{"big":12345678901234567890,"pane":"%0","start":-20}`},
		{name: "--args plus pairs", raw: `{"pane":"%0"}`, pairs: []string{"start=-20"}, want: `{"pane":"%0","start":-20}`},
		{name: "non-ASCII", pairs: []string{"s=zażółć"}, want: `{"s":"zażółć"}`},

		{name: "no operator", pairs: []string{"pane"}, err: "want NAME=VALUE or NAME:=JSON"},
		{name: "empty name", pairs: []string{"=5"}, err: "name before = or := is empty"},
		{name: "empty name :=", pairs: []string{":=5"}, err: "name before = or := is empty"},
		{name: "bad JSON", pairs: []string{"lines:=[1,"}, err: `argument "lines:=[1,": not valid JSON`},
		{name: "bare word is not JSON", pairs: []string{"s:=hello"}, err: "not valid JSON"},
		{name: "empty JSON", pairs: []string{"s:="}, err: "not valid JSON"},
		{name: "two JSON values", pairs: []string{"s:=1 2"}, err: "not valid JSON"},
		{name: "number out of float range", pairs: []string{"f:=1e400"}, want: `{"f":1e400}`},
		{name: "duplicate name", pairs: []string{"a=1", "a=2"}, err: "a is given more than once"},
		{name: "duplicate across forms", pairs: []string{"a=1", "a:=2"}, err: "a is given more than once"},
		{name: "duplicate with --args", raw: `{"a":1}`, pairs: []string{"a=2"}, err: "a is given more than once"},
		{name: "--args bad JSON", raw: `{"a":`, err: "--args: not valid JSON"},
		{name: "--args trailing data", raw: `{} {}`, err: "--args: not valid JSON"},
		// null decoded into a map leaves it nil; a later pair would panic.
		{name: "invalid UTF-8 name", pairs: []string{"\xff=1"}, err: "not valid UTF-8"},
		{name: "invalid UTF-8 value", pairs: []string{"s=a\xfe"}, err: "not valid UTF-8"},
		{name: "invalid UTF-8 --args", raw: "{\"\xfe\":1}", err: "--args: not valid UTF-8"},
		{name: "--args null", raw: `null`, pairs: []string{"a=1"}, err: "--args: want a JSON object, got null"},
		{name: "--args array", raw: `[1]`, err: "want a JSON object, got an array"},
		{name: "--args string", raw: `"x"`, err: "want a JSON object, got a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseArgs(c.pairs, c.raw)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !cmdutil.IsFlagError(err) {
					t.Fatalf("ParseArgs(%q, %q) = %v, %v; want a usage error containing %q", c.pairs, c.raw, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArgs(%q, %q): %v", c.pairs, c.raw, err)
			}
			data, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != c.want {
				t.Fatalf("ParseArgs(%q, %q) = %s, want %s", c.pairs, c.raw, data, c.want)
			}
		})
	}
}

// The parser runs before stem-mcp is started: a bad argument costs no
// process and says what is wrong.
func TestRunRejectsBadArgsFirst(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, MCPBinary: func() (string, error) {
		t.Fatal("stem-mcp looked up for a call with bad arguments")
		return "", nil
	}}
	cmd := NewCmdCall(f, nil)
	cmd.SetArgs([]string{"pane_capture", "pane=%0", "pane=%1"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(context.Background()); !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "pane is given more than once") {
		t.Fatalf("err = %v", err)
	}
}

// FuzzCallArgs: the parser never panics, and whatever it accepts is a JSON
// object (what MCP's tools/call requires as arguments). pairs is split on
// NUL into NAME=VALUE words.
func FuzzCallArgs(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""},
		{"n=5\x00t=true\x00s=x", ""},
		{`lines:=["a","b"]`, `{"pane":"%0"}`},
		{"a=b:=c\x00:=1\x00=2", ""},
		{"a=1", "null"},
		{"a=1\x00a=2", ""},
		{"x:=1e400\x00y=-0.0e-0", "[]"},
		{"k:={\"a\":\"\xff\"}", "{\"\xfe\":1}"},
		{"f=1.5e308\x00g=NaN", `{"a":{"b":[1,2,{"c":null}]}}`},
		{"big:=123456789012345678901234567890", ""},
		{"n=5 \x00m=2.5\t", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pairs, raw string) {
		var args []string
		if pairs != "" {
			args = strings.Split(pairs, "\x00")
		}
		out, err := ParseArgs(args, raw)
		if err != nil {
			if !cmdutil.IsFlagError(err) {
				t.Fatalf("error is not a usage error: %v", err)
			}
			return
		}
		if out == nil {
			t.Fatal("nil map without an error")
		}
		data, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("result does not encode: %v (%#v)", err, out)
		}
		if !json.Valid(data) || !bytes.HasPrefix(data, []byte("{")) {
			t.Fatalf("result is not a JSON object: %s", data)
		}
		// Numbers stay literals (1e400 is valid JSON, if not a float64).
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var back map[string]any
		if err := dec.Decode(&back); err != nil || len(back) != len(out) {
			t.Fatalf("result does not decode as an object with %d keys: %v %s", len(out), err, data)
		}
	})
}

// TOOL completes to the tools of --level (observe by default).
func TestToolNameCompletion(t *testing.T) {
	for _, c := range []struct {
		args       []string
		has, hasnt string
	}{
		{[]string{"__complete", "call", ""}, "pane_capture", "pane_send_keys"},
		{[]string{"__complete", "call", "--level", "assist", ""}, "pane_send_keys", "pane_run"},
		{[]string{"__complete", "call", "--level", "full", ""}, "pane_run", "no-such-tool"},
	} {
		ios, _, out, _ := iostreams.Test()
		root := &cobra.Command{Use: "mcp"}
		root.AddCommand(NewCmdCall(&cmdutil.Factory{IOStreams: ios}, nil))
		root.SetOut(out)
		root.SetArgs(c.args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		got := "\n" + out.String()
		if !strings.Contains(got, "\n"+c.has+"\n") || strings.Contains(got, "\n"+c.hasnt+"\n") || !strings.Contains(got, "resource:stem://context") {
			t.Errorf("%v: completions\n%s", c.args, got)
		}
	}
}
