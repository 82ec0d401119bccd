package rpcguard

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/neovim/go-client/msgpack"
)

// encode packs msgpack-RPC messages the way Neovim does.
func encode(t testing.TB, msgs ...[]any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func readAll(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	_, err := io.Copy(&out, r)
	return out.Bytes(), err
}

func TestRepliesPassUnchanged(t *testing.T) {
	in := encode(t,
		[]any{1, 1, nil, map[string]any{"mode": "n", "blocking": false}},
		[]any{1, 2, []any{0, "E492: Not an editor command"}, nil},
		[]any{1, 3, nil, []any{strings.Repeat("line\n", 1000), []any{1, 2.5, true, []byte{0, 1}}}},
	)
	out, err := readAll(NewReader(bytes.NewReader(in), Options{}))
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("err %v, passed %d of %d bytes unchanged: %v", err, len(out), len(in), bytes.Equal(out, in))
	}
}

func TestRefused(t *testing.T) {
	lim := Limits{Message: 1 << 16, String: 1 << 12, Len: 100, Values: 300, Depth: 8}
	nested := func(d int) []byte {
		p := []byte{0x94, 0x01, 0x01, 0xc0}
		for i := 0; i < d; i++ {
			p = append(p, 0x91)
		}
		return append(p, 0xc0)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"array of 2^32-1 in an error", []byte{0x94, 0x01, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}, "array of 4294967295"},
		{"array over Len", append([]byte{0x94, 0x01, 0x01, 0xc0, 0xdc, 0x00, 0x65}, bytes.Repeat([]byte{0xc0}, 101)...), "array of 101 elements (at most 100)"},
		{"map of 2^32-1", []byte{0x94, 0x01, 0x01, 0xdf, 0xff, 0xff, 0xff, 0xff}, "map of 4294967295 pairs"},
		{"string of 4 GiB", []byte{0x94, 0x01, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff}, "string of 4294967295 bytes"},
		{"binary of 4 GiB", []byte{0x94, 0x01, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff}, "binary value of 4294967295 bytes"},
		{"extension of 4 GiB", []byte{0x94, 0x01, 0x01, 0xc9, 0xff, 0xff, 0xff, 0xff, 0x00}, "extension value of 4294967295 bytes"},
		{"deep", nested(9), "nested deeper than 8"},
		{"too many values", append([]byte{0x94, 0x01, 0x01, 0xc0, 0xdc, 0x00, 0x1e}, bytes.Repeat(append([]byte{0x9f}, bytes.Repeat([]byte{0xc0}, 15)...), 30)...), "more than 300 values"},
		{"not an array", []byte{0x81, 0xa1, 0x61, 0x01}, "not an array"},
		{"wrong element count", []byte{0x92, 0x01, 0x01}, "2 elements"},
		{"unused type byte", []byte{0x94, 0x01, 0x01, 0xc1, 0xc0}, "0xc1"},
		{"type not a number", []byte{0x94, 0xa1, 0x61, 0x01, 0xc0, 0xc0}, "type is not a number"},
		{"unknown type", []byte{0x94, 0x07, 0x01, 0xc0, 0xc0}, "type 7"},
		{"method not a string", []byte{0x93, 0x02, 0x05, 0x90}, "method is not a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			r := NewReader(bytes.NewReader(c.in), Options{Limits: lim})
			out, err := readAll(r)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an *Error saying %q", err, c.want)
			}
			if len(out) != 0 {
				t.Fatalf("passed %d bytes of a refused message", len(out))
			}
			if n, _ := r.Read(make([]byte, 10)); n != 0 {
				t.Fatal("read on after a refusal")
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("allocated %d bytes for a %d-byte message", grew, len(c.in))
			}
		})
	}
}

func TestArrayBeyondTheMessageSize(t *testing.T) {
	in := []byte{0x94, 0x01, 0x01, 0xc0, 0xdc, 0x00, 0x3c}
	_, err := readAll(NewReader(bytes.NewReader(in), Options{Limits: Limits{Message: 50}}))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "an array of 60 elements in a message of at most 50 bytes") {
		t.Fatalf("err = %v", err)
	}
}

// A length that is allowed but whose bytes never come costs only what
// arrived.
func TestBufferGrowsWithTheData(t *testing.T) {
	in := append([]byte{0x94, 0x01, 0x01, 0xc0, 0xdb, 0x00, 0x3f, 0xff, 0xff}, "only this much"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAll(NewReader(bytes.NewReader(in), Options{Limits: Limits{Message: 8 << 20, String: 8 << 20}}))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 512<<10 {
		t.Fatalf("a 4 MiB claim with 14 bytes behind it allocated %d bytes", grew)
	}
}

func TestServerRequestsAndNotificationsDropped(t *testing.T) {
	evil := "\x1b]0;pwned\x07\x1b[2J"
	reply := []any{1, 9, nil, "ok"}
	in := encode(t, []any{0, 77, evil, []any{}}, []any{2, evil, []any{1}}, []any{2, "nvim_buf_lines_event", []any{}}, reply)
	r := NewReader(bytes.NewReader(in), Options{})
	out, err := readAll(r)
	if err != nil || !bytes.Equal(out, encode(t, reply)) || r.Dropped() != 3 {
		t.Fatalf("err %v, dropped %d, passed %x", err, r.Dropped(), out)
	}
	r = NewReader(bytes.NewReader(in), Options{Accept: func(m string) bool { return m == "nvim_buf_lines_event" }})
	out, err = readAll(r)
	if err != nil || !bytes.Equal(out, encode(t, []any{2, "nvim_buf_lines_event", []any{}}, reply)) || r.Dropped() != 2 {
		t.Fatalf("with Accept: err %v, dropped %d, passed %x", err, r.Dropped(), out)
	}
}

func TestEndOfStream(t *testing.T) {
	full := encode(t, []any{1, 1, nil, "x"})
	if out, err := readAll(NewReader(bytes.NewReader(full), Options{})); err != nil || !bytes.Equal(out, full) {
		t.Fatalf("clean end: %v", err)
	}
	r := NewReader(bytes.NewReader(full[:len(full)-1]), Options{})
	if out, err := readAll(r); !errors.Is(err, io.ErrUnexpectedEOF) || len(out) != 0 {
		t.Fatalf("cut message: %v, %d bytes passed", err, len(out))
	}
}

// repeat yields its message over and over, like a session's stream.
type repeat struct {
	msg []byte
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := copy(p, r.msg[r.off:])
	r.off = (r.off + n) % len(r.msg)
	return n, nil
}

// BenchmarkReader85KB passes replies the size of a 1,000-line buffer read
// (as nvim_buffer_read gets it) through one Reader, as a session does.
func BenchmarkReader85KB(b *testing.B) {
	lines := make([]any, 1000)
	for i := range lines {
		lines[i] = strings.Repeat("x", 80)
	}
	msg := encode(b, []any{1, 1, nil, map[string]any{"lines": lines, "tick": 5}})
	b.SetBytes(int64(len(msg)))
	g := NewReader(&repeat{msg: msg}, Options{})
	buf := make([]byte, 4096)
	for b.Loop() {
		for n := 0; n < len(msg); {
			m, err := g.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}
