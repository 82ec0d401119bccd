package tmux

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseKeys(t *testing.T) {
	cases := []struct {
		spec string
		want string // fmt of []Key
		err  bool
	}{
		{"make{Enter}", "[{make  0} { Enter 0}]", false},
		{"{C-c}", "[{ C-c 0}]", false},
		{"{c-C}{esc}{RETURN}", "[{ C-c 0} { Escape 0} { Enter 0}]", false},
		{"{Up 3}x", "[{ Up 3} {x  0}]", false},
		{"a{{b}", "[{a{b}  0}]", false},
		{"}{{}}", "[{}{}}  0}]", false},
		{"line1\nline2", "[{line1\nline2  0}]", false},
		{"", "[]", false},
		{"{", "", true},
		{"{Enter", "", true},
		{"{}", "", true},
		{"{run-shell}", "", true},
		{"{Enter 0}", "", true},
		{"{Enter 101}", "", true},
		{"{Enter x}", "", true},
		{"{Enter  2}", "", true},
		{"\xff", "", true},
		{strings.Repeat("a", MaxKeySpec+1), "", true},
	}
	for _, c := range cases {
		keys, err := ParseKeys(c.spec)
		if c.err {
			if err == nil || !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("ParseKeys(%q) = %v, %v; want ErrInvalidArgument", c.spec, keys, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseKeys(%q): %v", c.spec, err)
			continue
		}
		if got := fmt.Sprint(keys); got != c.want && !(len(keys) == 0 && c.want == "[]") {
			t.Errorf("ParseKeys(%q) = %s, want %s", c.spec, got, c.want)
		}
	}
}

var safeCommand = regexp.MustCompile(`^send-keys -t %[0-9]+( -N [0-9]+)? (-H( [0-9a-f]{2})+|[A-Za-z][A-Za-z0-9-]*)$`)

func TestSendKeysCommands(t *testing.T) {
	cmds, err := sendKeysCommands("%3", []Key{{Text: "$(x);\n"}, {Name: "enter"}, {Name: "Up", Repeat: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"send-keys -t %3 -H 24 28 78 29 3b 0a", "send-keys -t %3 Enter", "send-keys -t %3 -N 2 Up"}
	if fmt.Sprint(cmds) != fmt.Sprint(want) {
		t.Fatalf("got %q", cmds)
	}
	for _, bad := range [][]Key{
		{{Name: "run-shell"}},
		{{Name: "Enter; run-shell x"}},
		{{Text: "a", Name: "Enter"}},
		{{Text: "a\x00"}},
		{{Text: "a", Repeat: 2}},
		{{Name: "Enter", Repeat: MaxKeyRepeat + 1}},
		{{Text: strings.Repeat("a", MaxKeyBytes+1)}},
	} {
		if _, err := sendKeysCommands("%3", bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("sendKeysCommands(%+v) err = %v", bad, err)
		}
	}
}

// FuzzParseKeys: whatever the spec, parsing terminates, a parsed spec is
// always sendable, every command is hex or an allowlisted name, and the
// literal text survives exactly.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{"make{Enter}", "{C-c}{Up 3}", "a{{b}", "$(touch x)#{pane_id};\n", "{", "{Enter 100}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		keys, err := ParseKeys(spec)
		if err != nil {
			return
		}
		if !utf8.ValidString(spec) {
			t.Fatalf("accepted invalid UTF-8")
		}
		var text strings.Builder
		for _, k := range keys {
			if k.Name != "" {
				if _, ok := LookupKey(k.Name); !ok {
					t.Fatalf("name %q not allowlisted", k.Name)
				}
				continue
			}
			text.WriteString(k.Text)
		}
		want := strings.ReplaceAll(braceless(spec), "{{", "{")
		if text.String() != want {
			t.Fatalf("text %q, want %q", text.String(), want)
		}
		cmds, err := sendKeysCommands("%0", keys)
		if err != nil {
			if strings.Contains(spec, "\x00") {
				return
			}
			t.Fatalf("parsed but not sendable: %v", err)
		}
		for _, c := range cmds {
			if !safeCommand.MatchString(c) {
				t.Fatalf("unsafe command %q", c)
			}
		}
	})
}

// braceless removes {Name} groups (not {{) from a valid spec.
func braceless(spec string) string {
	var b strings.Builder
	for i := 0; i < len(spec); i++ {
		if spec[i] == '{' {
			if i+1 < len(spec) && spec[i+1] == '{' {
				b.WriteString("{{")
				i++
				continue
			}
			i += strings.IndexByte(spec[i:], '}')
			continue
		}
		b.WriteByte(spec[i])
	}
	return b.String()
}

// TestKeyNamesStable: the list is sorted, without duplicates, the same on
// every call (it is built from a map), and every name is accepted.
func TestKeyNamesStable(t *testing.T) {
	first := KeyNames()
	if len(first) != 16+12+26 {
		t.Fatalf("%d key names, want %d: %v", len(first), 16+12+26, first)
	}
	for i := 1; i < len(first); i++ {
		if first[i-1] >= first[i] {
			t.Fatalf("KeyNames not sorted or with duplicates at %d: %v", i, first)
		}
	}
	for _, k := range first {
		if got, ok := LookupKey(k); !ok || got != k {
			t.Errorf("LookupKey(%q) = %q, %v", k, got, ok)
		}
	}
	for i := 0; i < 20; i++ {
		if got := KeyNames(); fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("KeyNames changed between calls:\n%v\n%v", got, first)
		}
	}
}
