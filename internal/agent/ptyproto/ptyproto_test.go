package ptyproto

import (
	"bytes"
	"errors"
	"io"
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
