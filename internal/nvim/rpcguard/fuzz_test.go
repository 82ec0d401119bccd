package rpcguard

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/neovim/go-client/msgpack"
)

// fuzzLimits are small so the fuzzer reaches every limit quickly.
var fuzzLimits = Limits{Message: 4 << 10, String: 1 << 10, Len: 64, Values: 256, Depth: 6}

// FuzzReader feeds arbitrary server bytes through the Reader and then
// through go-client's decoder, as the nvim client does. Whatever the input:
// no panic; the Reader ends with io.EOF, io.ErrUnexpectedEOF or a refusal;
// everything it passed is whole msgpack-RPC replies within the limits,
// which go-client's decoder reads value by value back to the exact end.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0x94, 0x01, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add(encode(f, []any{1, 1, nil, map[string]any{"mode": "n", "blocking": false}}))
	f.Add(encode(f, []any{1, 2, []any{0, "E5108: Error executing lua"}, nil}))
	f.Add(encode(f, []any{0, 77, "\x1b]0;t\x07", []any{}}, []any{2, "redraw", []any{[]any{"flush"}}}, []any{1, 3, nil, []any{"a", "b"}}))
	f.Add([]byte{0x94, 0x01, 0x01, 0xc0, 0xd6, 0x00, 0x00, 0x00, 0x00, 0x01})
	f.Add([]byte{0x94, 0x01, 0x01, 0xc0, 0xc7, 0x02, 0x01, 0xcd, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in), Options{Limits: fuzzLimits})
		var passed bytes.Buffer
		var msgs [][]byte
		buf := make([]byte, 7) // odd-sized reads cross message boundaries
		var err error
		for {
			var n int
			n, err = r.Read(buf)
			passed.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrRefused) {
			t.Fatalf("unexpected error %T %v", err, err)
		}
		// Split what passed into messages with go-client's own decoder:
		// every message must be one whole reply.
		dec := msgpack.NewDecoder(bytes.NewReader(passed.Bytes()))
		for {
			if err := dec.Unpack(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("passed bytes go-client cannot read: %v", err)
			}
			if dec.Type() != msgpack.ArrayLen || dec.Len() != 4 {
				t.Fatalf("passed a message that is not a 4-element reply: %v %d", dec.Type(), dec.Len())
			}
			if err := dec.Unpack(); err != nil || dec.Type() != msgpack.Int && dec.Type() != msgpack.Uint || dec.Uint() != kindReply {
				t.Fatalf("passed a message of another kind: %v", err)
			}
			if err := dec.Skip(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if err := dec.Unpack(); err != nil {
					t.Fatalf("passed a truncated message: %v", err)
				}
				if err := dec.Skip(); err != nil {
					t.Fatalf("passed a truncated message: %v", err)
				}
			}
			msgs = append(msgs, nil)
		}
		if passed.Len() > len(msgs)*fuzzLimits.Message {
			t.Fatalf("passed %d bytes in %d messages", passed.Len(), len(msgs))
		}
		// Decoding into empty interfaces, as go-client does for error
		// values, must stay bounded too (a crash here fails the fuzzer).
		dec = msgpack.NewDecoder(bytes.NewReader(passed.Bytes()))
		for range msgs {
			var v any
			if dec.Decode(&v) != nil {
				break
			}
		}
	})
}
