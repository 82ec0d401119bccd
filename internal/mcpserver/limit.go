package mcpserver

import (
	"bufio"
	"io"
)

// maxRequestBytes bounds one JSON-RPC message. The stdio transport reads
// whole lines, so without a bound a client could make us buffer gigabytes.
const maxRequestBytes = 4 << 20

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
