package jsonwire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// sameAsStdlib checks that AppendString(s) is valid JSON decoding to what
// encoding/json's encoding of s decodes to.
func sameAsStdlib(t *testing.T, s string) {
	t.Helper()
	got := AppendString(nil, s)
	if !json.Valid(got) {
		t.Fatalf("AppendString(%q) = %s: not valid JSON", s, got)
	}
	std, _ := json.Marshal(s)
	var a, b string
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	json.Unmarshal(std, &b)
	if a != b {
		t.Fatalf("AppendString(%q) decodes to %q, encoding/json's to %q", s, a, b)
	}
	// No raw control characters or line separators on the wire.
	for _, c := range got {
		if c < 0x20 {
			t.Fatalf("AppendString(%q) = %q: raw control byte", s, got)
		}
	}
	if bytes.Contains(got, []byte("\u2028")) || bytes.Contains(got, []byte("\u2029")) {
		t.Fatalf("AppendString(%q): raw U+2028/2029", s)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "a", "plain ascii text longer than eight bytes",
		"\"quoted\" and \\back\\slashed\\", "tab\there\nnew line\r\n",
		"\x00\x01\x1f\x7f", "\b\f", "ż ó ł ć ę ś ą ź ń — «» 漢字 😀",
		"\xff\xfe invalid \xc3", "\xe2\x80", "line\u2028sep\u2029para",
		"<script>&amp;</script>", strings.Repeat("x", 7) + "\"", strings.Repeat("y", 8) + "\n" + strings.Repeat("z", 17),
		"\x1b[31mred\x1b[0m", "12345678\x80", "1234567\xe2\x80\xa8",
	} {
		sameAsStdlib(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "\"\\\n", "\xff", "ż\u2028", strings.Repeat("a\tb", 30)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameAsStdlib(t, s) })
}

func TestAppendValues(t *testing.T) {
	type point struct {
		X int    `json:"x"`
		S string `json:"s,omitempty"`
	}
	v := map[string]any{
		"text": "a\tb\n", "n": 12, "big": int64(1) << 60, "neg": -3, "ok": true, "no": false,
		"nil": nil, "list": []any{1, "two", 3.5, nil, map[string]any{"k": "v"}},
		"ints": []int{1, 2, 3}, "noints": []int(nil), "strs": []string{"a", "\"b\""},
		"struct": point{X: 1}, "ptr": &point{X: 2, S: "s"}, "float": 0.1, "u32": uint32(7),
		"raw": json.RawMessage(`{"a": [1, 2]}`), "nested": map[string]any{"z": 1, "a": map[string]any{}},
		"emptylist": []any{}, "nilmap": map[string]any(nil),
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := json.Marshal(v)
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	json.Unmarshal(std, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("Marshal:\n%s\nencoding/json:\n%s", got, std)
	}
	// Keys come out sorted, as encoding/json writes them.
	if !bytes.HasPrefix(got, []byte(`{"big":`)) {
		t.Fatalf("keys not sorted: %s", got)
	}
	if _, err := Marshal(map[string]any{"bad": make(chan int)}); err == nil {
		t.Fatal("a channel encoded without error")
	}
}

var sink []byte

func benchText() string {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString("  ")
		b.WriteString(strings.Repeat("9", 3))
		b.WriteString("\t    x[i] = compute(i) + offset; /* a line of the benchmark file */\n")
	}
	return b.String()
}

func BenchmarkAppendString(b *testing.B) {
	s := benchText()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		sink = AppendString(sink[:0], s)
	}
}

func BenchmarkStdlibString(b *testing.B) {
	s := benchText()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		sink, _ = json.Marshal(s)
	}
}
