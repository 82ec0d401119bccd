package mcpserver_test

import (
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
)

// BenchmarkRawAuditedHint is an effectful call (nvim_hint, audited: an
// intent line before it runs and an outcome line after) over stdio with a
// minimal client: what the audit costs a call that acts.
func BenchmarkRawAuditedHint(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	c := newRawClient(b, in, "assist")
	c.roundTrip(b, `"method":"tools/call","params":{"name":"nvim_open","arguments":{"path":"t1/words.c"}}`)
	benchRaw(b, c, "nvim_hint", `{"path":"t1/words.c","line":2,"text":"look here"}`)
}

// BenchmarkRawAuditedEdit is nvim_buffer_edit of one line over stdio.
func BenchmarkRawAuditedEdit(b *testing.B) {
	in := testenv.New(b, testenv.Options{})
	in.Select(b)
	c := newRawClient(b, in, "assist")
	c.roundTrip(b, `"method":"tools/call","params":{"name":"nvim_open","arguments":{"path":"t1/words.c"}}`)
	benchRaw(b, c, "nvim_buffer_edit", `{"path":"t1/words.c","start":1,"end":1,"lines":["#include \"words.h\" // bench"]}`)
}
