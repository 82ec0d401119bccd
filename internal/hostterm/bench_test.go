package hostterm

import (
	"bytes"
	"io"
	"testing"
)

// screenful is what tmux writes for a busy pane: text, SGR, cursor moves.
func screenful() []byte {
	var b bytes.Buffer
	for i := 0; i < 400; i++ {
		b.WriteString("\x1b[12;1H\x1b[1;32mok\x1b[0m   tests/words_test.c:42: count_words(\"zażółć\") == 1\r\n")
	}
	return b.Bytes()
}

func BenchmarkGuard(b *testing.B) {
	p := screenful()
	g := NewGuard(io.Discard)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		g.Write(p)
	}
}

// BenchmarkCopy is the relay without a guard, for comparison.
func BenchmarkCopy(b *testing.B) {
	p := screenful()
	buf := make([]byte, 0, len(p))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		buf = append(buf[:0], p...)
		io.Discard.Write(buf)
	}
}
