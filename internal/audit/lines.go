package audit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// lineReader yields non-empty lines up to 1 MiB each.
type lineReader struct{ s *bufio.Scanner }

func newLineReader(r io.Reader) *lineReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1<<20)
	return &lineReader{s}
}

func (l *lineReader) next() ([]byte, error) {
	for l.s.Scan() {
		if line := bytes.TrimSpace(l.s.Bytes()); len(line) > 0 {
			return line, nil
		}
	}
	if err := l.s.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return nil, io.EOF
}
