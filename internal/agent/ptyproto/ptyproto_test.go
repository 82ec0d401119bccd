package ptyproto

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var b bytes.Buffer
	big := bytes.Repeat([]byte("x"), MaxChunk*2+5)
	if err := WriteJSON(&b, Hello, HelloMsg{Version: Version, Term: "tmux-256color", Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	if err := WriteData(&b, big); err != nil {
		t.Fatal(err)
	}
	if err := WriteSize(&b, 70000, -3); err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&b, Data, nil); err != nil {
		t.Fatal(err)
	}
	typ, p, err := ReadFrame(&b)
	if err != nil || typ != Hello || !bytes.Contains(p, []byte(`"term":"tmux-256color"`)) {
		t.Fatalf("hello: %q %q %v", typ, p, err)
	}
	var got []byte
	for range 3 {
		typ, p, err := ReadFrame(&b)
		if err != nil || typ != Data || len(p) > MaxChunk {
			t.Fatalf("data: %q %d %v", typ, len(p), err)
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("data changed on the way")
	}
	typ, p, err = ReadFrame(&b)
	rows, cols, perr := ParseSize(p)
	if err != nil || typ != Size || perr != nil || rows != 0xffff || cols != 0 {
		t.Fatalf("size: %q %d %d %v %v", typ, rows, cols, err, perr)
	}
	if typ, p, err = ReadFrame(&b); err != nil || typ != Data || len(p) != 0 {
		t.Fatalf("empty frame: %q %v", typ, err)
	}
	if _, _, err := ReadFrame(&b); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
}

func TestFrameLimitsAndTruncation(t *testing.T) {
	if err := WriteFrame(io.Discard, Data, make([]byte, MaxPayload+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
	// A header announcing more than MaxPayload is refused before reading.
	hdr := []byte{Data, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := ReadFrame(bytes.NewReader(hdr)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized read: %v", err)
	}
	// A frame cut short is an unexpected EOF, not a clean end.
	var b bytes.Buffer
	WriteFrame(&b, Data, []byte("hello"))
	if _, _, err := ReadFrame(bytes.NewReader(b.Bytes()[:7])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	if _, _, err := ParseSize([]byte{1, 2, 3}); err == nil {
		t.Fatal("short size frame accepted")
	}
}

// A relay's frame header may claim up to 4 GiB: the host reads at most
// MaxFromRelay, and allocates only for the bytes that arrive.
func TestReadFrameMaxBounds(t *testing.T) {
	claim := func(n uint32, body string) io.Reader {
		return bytes.NewReader(append([]byte{Data, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...))
	}
	if _, _, err := ReadFrameMax(claim(0xffffffff, ""), MaxFromRelay); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a 4 GiB claim: %v", err)
	}
	if _, _, err := ReadFrameMax(claim(MaxFromRelay+1, ""), MaxFromRelay); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ReadFrameMax(claim(MaxPayload, "short"), MaxPayload)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut frame: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("a 1 MiB claim with 5 bytes behind it allocated %d bytes", grew)
	}
	typ, p, err := ReadFrameMax(claim(5, "hello"), MaxFromRelay)
	if err != nil || typ != Data || string(p) != "hello" {
		t.Fatalf("a frame within the limit: %q %q %v", typ, p, err)
	}
}
