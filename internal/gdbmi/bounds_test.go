package gdbmi

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeBridge serves g.sock: for each command line it reads, it writes what
// answer returns for the command's token.
func fakeBridge(t *testing.T, answer func(tok string, w *bufio.Writer)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "g.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br, bw := bufio.NewReader(c), bufio.NewWriterSize(c, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			i := 0
			for i < len(line) && line[i] >= '0' && line[i] <= '9' {
				i++
			}
			answer(line[:i], bw)
			bw.Flush()
		}
	}()
	return path
}

// A hostile bridge cannot make the host hold unbounded text: console
// output for one command is cut at maxCallOutput, events over
// maxEventLine keep only their class and a cut text, a line of empty
// lists stops at maxValues, and a line over maxResultLine is skipped.
func TestHostileBridgeBounded(t *testing.T) {
	t.Parallel()
	chunk := strings.Repeat("x", 64<<10)
	sock := fakeBridge(t, func(tok string, w *bufio.Writer) {
		// Events first: a huge untokened console record, and a huge
		// *stopped record.
		w.WriteString("~\"" + strings.Repeat(chunk, 8) + "\"\n")
		w.WriteString("*stopped,reason=\"x\",junk=[" + strings.Repeat("[],", 100000) + "[]]\n")
		// A line of 2^20 empty lists: over maxValues.
		w.WriteString(tok + "^done,x=[" + strings.Repeat("[],", 1<<20) + "[]]\n")
		// A line over maxResultLine is skipped whole.
		w.WriteString(tok + "^done,x=\"" + strings.Repeat("y", maxResultLine) + "\"\n")
		// 4 MiB of console output for this command, then its result.
		for i := 0; i < 64; i++ {
			w.WriteString(tok + "~\"" + chunk + "\"\n")
		}
		w.WriteString(tok + "^done\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Exec(ctx, BreakList())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Console) > maxCallOutput+len(outputCut) || !strings.HasSuffix(res.Console, outputCut) {
		t.Fatalf("console output of %d bytes (cap %d)", len(res.Console), maxCallOutput)
	}
	for _, want := range []string{"console", "stopped"} {
		select {
		case ev := <-c.Events():
			if len(ev.Text) > maxEventLine+len(outputCut) || len(ev.Record.Results) != 0 {
				t.Fatalf("%s event kept %d bytes of text and %d results", want, len(ev.Text), len(ev.Record.Results))
			}
			if want == "stopped" && ev.Class != "stopped" {
				t.Fatalf("event %q, want stopped", ev.Class)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	t.Logf("heap in use after the hostile bridge: %d MiB", m.HeapInuse>>20)
}

func TestParseValueCap(t *testing.T) {
	t.Parallel()
	_, err := Parse("^done,x=[" + strings.Repeat("[],", maxValues) + "[]]")
	if err == nil || !strings.Contains(err.Error(), "values in one record") {
		t.Fatalf("a record of %d values: %v", maxValues+1, err)
	}
	if _, err := Parse("^done,x=[" + strings.Repeat("[],", maxValues-10) + "[]]"); err != nil {
		t.Fatalf("a record within the cap: %v", err)
	}
}
