package supervisor

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrefixLines(t *testing.T) {
	var out bytes.Buffer
	p := &prefixLines{w: &out, prefix: []byte("feed: ")}
	for _, s := range []string{"stem-mcp: one\nstem-", "mcp: two\n", "\n", "tail"} {
		if n, err := p.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	want := "feed: stem-mcp: one\nfeed: stem-mcp: two\nfeed: \nfeed: tail\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	long := strings.Repeat("x", maxPartial+1)
	p.Write([]byte(long))
	if got := out.String(); got != "feed: "+long+"\n" {
		t.Fatalf("a line past the bound is held: %d bytes written", len(got))
	}
}
