// Package chainlog is what stem's two append-only JSON-lines logs, the
// audit log and the provenance log, share: the hash that chains each line
// to the one before it, and finding a log's last line (to chain the next
// one to) without reading the whole log.
package chainlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
)

// Hash is a line's hash: hex sha256 of the previous line's hash, a
// newline, and the line's JSON without its own hash.
func Hash(prev string, body []byte) string {
	s := sha256.New()
	s.Write([]byte(prev))
	s.Write([]byte{'\n'})
	s.Write(body)
	return hex.EncodeToString(s.Sum(nil))
}

// ErrLongLine is a last line longer than the log's writer ever writes.
var ErrLongLine = errors.New("the last line is longer than any stem writes")

// LastLine returns the last non-empty line of f without its newline (empty
// for an empty log). It reads backwards from the end in growing chunks, and
// gives up with ErrLongLine after max bytes without a line break.
func LastLine(f *os.File, max int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var tail []byte
	n := int64(8 << 10) // most lines fit in the first read
	for off := fi.Size(); off > 0; n *= 2 {
		n = min(n, off)
		off -= n
		buf := make([]byte, n, n+int64(len(tail)))
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		tail = append(buf, tail...)
		trimmed := bytes.TrimRight(tail, "\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 || off == 0 {
			return trimmed[i+1:], nil
		}
		if len(tail) > max {
			return nil, ErrLongLine
		}
	}
	return nil, nil
}
