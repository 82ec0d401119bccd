package nvim

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// thousandLines loads a 1,000-line C-like buffer (about 40 KB).
func thousandLines(t testing.TB, n *nvimtest.Nvim) int {
	var buf int
	n.Lua(t, &buf, `local b = vim.api.nvim_create_buf(true, false)
local t = {}
for i = 1, 1000 do t[i] = string.format('    total += values[%d] * weight; /* line %d */', i, i) end
vim.api.nvim_buf_set_lines(b, 0, -1, true, t)
return b`)
	return buf
}

func BenchmarkReadBuffer1000(b *testing.B) {
	n := nvimtest.Start(b, nvimtest.Options{})
	c, err := Dial(context.Background(), n.Socket, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := thousandLines(b, n)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0)
		if err != nil || len(got.Lines()) != 1000 {
			b.Fatalf("%v, %d lines", err, len(got.Lines()))
		}
	}
}

// TestReadBufferLatency measures ReadBuffer of 1,000 lines (two round trips:
// nvim_get_mode, then the read chunk) and logs p50/p99. The MCP-level target
// is a p50 under 1 ms. Measured on a shared 2-core machine: p50 0.6-0.95 ms,
// of which Neovim's own work (Lua strings for 1,000 lines, msgpack) is
// about 0.2-0.35 ms and a bare nvim_buf_get_lines over RPC 0.35-0.6 ms. The
// assertion is a regression guard (e.g. a design that ships the whole buffer
// or adds round trips), set at 2 ms so that a loaded CI machine does not
// make it flaky.
func TestReadBufferLatency(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	buf := thousandLines(t, n)
	ctx := testCtx(t)
	const runs = 2000
	d := make([]time.Duration, 0, runs)
	for i := 0; i < runs+100; i++ {
		t0 := time.Now()
		got, err := c.ReadBuffer(ctx, Buf(buf), 1, 0, 0)
		el := time.Since(t0)
		if err != nil || len(got.Lines()) != 1000 || !strings.HasSuffix(got.Lines()[999].S, "line 1000 */") {
			t.Fatalf("read: %v", err)
		}
		if i >= 100 { // warm-up
			d = append(d, el)
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	p50, p99 := d[len(d)/2], d[len(d)*99/100]
	t.Logf("ReadBuffer 1000 lines: p50 %v, p99 %v, max %v (%d runs)", p50, p99, d[len(d)-1], len(d))
	if p50 > 2*time.Millisecond {
		t.Errorf("p50 %v: ReadBuffer alone is over twice the 1 ms MCP-level target", p50)
	}
}
