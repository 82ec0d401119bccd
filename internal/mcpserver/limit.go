package mcpserver

import (
	"bufio"
	"io"
)

// maxRequestBytes bounds one JSON-RPC message. The stdio transport reads
// whole lines, so without a bound a client could make us buffer gigabytes.
const maxRequestBytes = 4 << 20

// oversizeLine replaces a dropped message. It is deliberately not JSON, so
// the server answers with a standard parse error and goes on serving.
const oversizeLine = "stem-mcp: message over the size limit was dropped\n"

// limitLines passes through lines of at most max bytes; a longer line is
// discarded up to its newline and replaced by oversizeLine.
func limitLines(r io.Reader, max int, logf func(string, ...any)) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(r, 64*1024)
		for {
			line, err := readLimited(br, max)
			if line == nil && err != nil {
				pw.CloseWithError(err)
				return
			}
			if line == nil {
				logf("dropped a message over %d bytes", max)
				line = []byte(oversizeLine)
			}
			if _, werr := pw.Write(line); werr != nil {
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// readLimited returns the next line (with its newline); nil with a nil error
// means the line exceeded max and was skipped.
func readLimited(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max {
			// Skip to the end of this line.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return nil, nil
		}
		buf = append(buf, frag...)
		switch err {
		case nil:
			return buf, nil
		case bufio.ErrBufferFull:
			continue
		default:
			if len(buf) == 0 {
				return nil, err
			}
			return buf, err
		}
	}
}
