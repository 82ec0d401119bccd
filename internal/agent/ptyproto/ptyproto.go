// Package ptyproto is the small framed protocol between an agent's pseudo
// terminal on the host (served by `stemctl agent run` on a Unix socket in
// the instance's socket directory) and the relay that shows it in a window
// of the student's tmux (`stem-mcp agent-relay`, run inside the container).
//
// Every frame is one type byte, a big-endian uint32 payload length and the
// payload. The relay sends Hello first (its TERM and size), then Data (keys)
// and Size (window changes); the host answers Hello, then sends Data (the
// agent's output) and finally Exit. The package has no dependencies beyond
// the standard library and x/term, so stem-mcp (static, mounted in every
// container) stays small.
package ptyproto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version both sides send in Hello.
const Version = 1

// Frame types.
const (
	Hello byte = 'H' // JSON HelloMsg (both directions, first frame)
	Data  byte = 'D' // terminal bytes
	Size  byte = 'W' // 4 bytes: rows, cols (uint16 each), relay to host
	Exit  byte = 'X' // JSON ExitMsg, host to relay, last frame
)

// MaxPayload bounds one frame; Data is sent in chunks of at most MaxChunk.
// MaxFromRelay bounds a frame the host reads from a relay: the relay runs
// in the container and sends only Hello, Size and Data of at most MaxChunk.
const (
	MaxPayload   = 1 << 20
	MaxChunk     = 32 << 10
	MaxFromRelay = MaxChunk
)

// HelloMsg opens a connection. The relay fills Term, Rows and Cols; the
// host fills Agent, Provider and Instance.
type HelloMsg struct {
	Version  int    `json:"v"`
	Term     string `json:"term,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	Cols     int    `json:"cols,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Provider string `json:"provider,omitempty"`
	Instance string `json:"instance,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ExitMsg says how the agent ended.
type ExitMsg struct {
	Code    int    `json:"code"`
	Signal  string `json:"signal,omitempty"`
	Message string `json:"message,omitempty"`
}

// ErrTooLarge reports a frame over MaxPayload.
var ErrTooLarge = errors.New("ptyproto: frame too large")

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxPayload {
		return ErrTooLarge
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// WriteJSON writes a frame whose payload is v as JSON.
func WriteJSON(w io.Writer, typ byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, typ, data)
}

// WriteData writes p as Data frames of at most MaxChunk bytes.
func WriteData(w io.Writer, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxChunk)
		if err := WriteFrame(w, Data, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// WriteSize writes a Size frame.
func WriteSize(w io.Writer, rows, cols int) error {
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:2], clampU16(rows))
	binary.BigEndian.PutUint16(b[2:4], clampU16(cols))
	return WriteFrame(w, Size, b[:])
}

func clampU16(n int) uint16 {
	switch {
	case n < 0:
		return 0
	case n > 0xffff:
		return 0xffff
	}
	return uint16(n)
}

// ParseSize decodes a Size payload.
func ParseSize(p []byte) (rows, cols int, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("ptyproto: size frame of %d bytes", len(p))
	}
	return int(binary.BigEndian.Uint16(p[0:2])), int(binary.BigEndian.Uint16(p[2:4])), nil
}

// ReadFrame reads one frame of at most MaxPayload bytes. The payload is a
// fresh slice.
func ReadFrame(r io.Reader) (byte, []byte, error) { return ReadFrameMax(r, MaxPayload) }

// ReadFrameMax reads one frame of at most max bytes. The payload grows
// with the bytes that arrive, not with the length the header claims.
func ReadFrameMax(r io.Reader, max int) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:5])
	if uint64(n) > uint64(max) {
		return 0, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, max)
	}
	var b bytes.Buffer
	if _, err := io.CopyN(&b, r, int64(n)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], b.Bytes(), nil
}

func jsonUnmarshal(p []byte, v any) error { return json.Unmarshal(p, v) }
