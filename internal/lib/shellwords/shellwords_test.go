package shellwords

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	for in, want := range map[string][]string{
		`gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' build/t4.elf`: {"gdb-multiarch", "-q", "-ex", "target remote 127.0.0.1:1234", "build/t4.elf"},
		`gdb -q ./hello`:            {"gdb", "-q", "./hello"},
		`a "b c" d\ e 'f''g'`:       {"a", "b c", "d e", "fg"},
		`x "q\"uote" "back\\slash"`: {"x", `q"uote`, `back\slash`},
		`  spaced   out  `:          {"spaced", "out"},
		`empty '' arg`:              {"empty", "", "arg"},
	} {
		got, err := Split(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Split(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestSplitRefusesShell(t *testing.T) {
	for _, in := range []string{
		"gdb prog | tee log", "gdb; id", "gdb && id", "gdb > out", "gdb $(id)", "gdb `id`",
		"gdb $HOME", `gdb "$HOME"`, "gdb *.elf", "gdb ~/x", "gdb\nid", "gdb 'unterminated", `gdb "x`, `gdb \`, "", "   ",
		"gdb # comment", "(gdb)", "gdb {a,b}", "gdb !x", strings.Repeat("a", 9000),
	} {
		if w, err := Split(in); err == nil {
			t.Errorf("Split(%q) accepted: %q", in, w)
		}
	}
}

// TestQuoteRoundTripsThroughSh checks Quote against the real /bin/sh.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	words := []string{"plain", "", "two words", "it's", `"dq"`, "$HOME", "`id`", "$(id)", "a;b", "tab\there", "new\nline", "back\\slash", "*", "~", "é ü", "-e", "%0"}
	out, err := exec.Command("sh", "-c", "for a in "+Join(words)+`; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !reflect.DeepEqual(got, words) {
		t.Fatalf("round trip:\n got %q\nwant %q", got, words)
	}
}

func FuzzSplitJoin(f *testing.F) {
	f.Add(`gdb -q -ex 'target remote :1234' prog`)
	f.Add(`a "b c" d\ e`)
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		// Whatever Split accepts, Join must reproduce word for word.
		again, err := Split(Join(words))
		if err != nil {
			if !utf8.ValidString(s) {
				return
			}
			for _, w := range words {
				if strings.ContainsAny(w, "\n\r") {
					return
				}
			}
			t.Fatalf("Join(%q) = %q does not split: %v", words, Join(words), err)
		}
		if !reflect.DeepEqual(words, again) {
			t.Fatalf("round trip %q -> %q", words, again)
		}
	})
}

// Quote and Join make input for Split (no binary quotes words: only
// tests need them).

// Quote returns s quoted for a POSIX shell.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}
