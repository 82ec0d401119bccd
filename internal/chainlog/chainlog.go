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
	return LastLineBefore(f, 0, max)
}

// LastLineBefore is LastLine of f without its last skip bytes (a partial
// line, see Partial).
func LastLineBefore(f *os.File, skip int64, max int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var tail []byte
	n := int64(8 << 10) // most lines fit in the first read
	for off := fi.Size() - skip; off > 0; n *= 2 {
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

// Partial returns how many bytes at the end of f follow its last newline
// when they are the beginning of a line that starts as every line of
// these logs does (prefix, e.g. `{"seq":`): what a writer killed in the
// middle of its write leaves, since a write to a file can stop at a page
// boundary when its process gets SIGKILL. It returns 0 when f ends with a
// newline (or is empty), and ErrNotPartial for other bytes without one:
// those are not a cut-off write, and nothing may remove them.
func Partial(f *os.File, prefix string, max int) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size == 0 {
		return 0, nil
	}
	n := min(size, int64(max)+1)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil {
		return 0, err
	}
	if buf[n-1] == '\n' {
		return 0, nil
	}
	i := bytes.LastIndexByte(buf, '\n')
	if i < 0 && n < size {
		return 0, ErrNotPartial // longer than any line
	}
	tail := buf[i+1:]
	if !bytes.HasPrefix(tail, []byte(prefix)) && !bytes.HasPrefix([]byte(prefix), tail) {
		return 0, ErrNotPartial
	}
	return int64(len(tail)), nil
}

// ErrNotPartial is an end of a log without a newline that is not the
// beginning of one of its lines.
var ErrNotPartial = errors.New("the log ends in bytes that are not the beginning of an entry")
