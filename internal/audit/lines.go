package audit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// lineReader yields non-empty lines up to 1 MiB each. n is the 1-based
// number in the file of the line last returned, blank lines included, so a
// reported line number is the one an editor or `sed -n Np` shows.
type lineReader struct {
	s *bufio.Scanner
	n int
}

func newLineReader(r io.Reader) *lineReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1<<20)
	return &lineReader{s: s}
}

func (l *lineReader) next() ([]byte, error) {
	for l.s.Scan() {
		l.n++
		if line := bytes.TrimSpace(l.s.Bytes()); len(line) > 0 {
			return line, nil
		}
	}
	if err := l.s.Err(); err != nil {
		return nil, fmt.Errorf("read audit log after line %d: %w", l.n, err)
	}
	return nil, io.EOF
}
