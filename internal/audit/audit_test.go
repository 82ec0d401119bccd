package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), Entry{Event: ToolCall, Account: "alice", Instance: "native-amd64-demo-hello-t1", Level: "observe", Tool: "pane_capture", ArgsDigest: Digest(map[string]int{"i": i}), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChainVerifies(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5)
	res, err := l.Verify()
	if err != nil || !res.OK || res.Lines != 5 || res.LastSeq != 5 {
		t.Fatalf("verify = %+v, %v", res, err)
	}
	fi, _ := os.Stat(l.Path())
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit log mode %o, want 600", fi.Mode().Perm())
	}
}

func tamper(t *testing.T, name string, edit func(lines []string) []string, wantLine int) {
	t.Run(name, func(t *testing.T) {
		l, _ := Open(t.TempDir())
		appendN(t, l, 5)
		data, _ := os.ReadFile(l.Path())
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = edit(lines)
		os.WriteFile(l.Path(), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		res, err := l.Verify()
		if err != nil {
			t.Fatal(err)
		}
		if res.OK || res.BrokenLine != wantLine {
			t.Fatalf("verify = %+v, want broken line %d", res, wantLine)
		}
	})
}

func TestTamperDetected(t *testing.T) {
	tamper(t, "edit field", func(l []string) []string {
		l[2] = strings.Replace(l[2], `"level":"observe"`, `"level":"full"`, 1)
		return l
	}, 3)
	tamper(t, "delete line", func(l []string) []string { return append(l[:1], l[2:]...) }, 2)
	tamper(t, "swap lines", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2)
	// Numbers are lines of the file, blank lines included, as sed -n Np shows.
	tamper(t, "blank lines count", func(l []string) []string {
		l[2] = strings.Replace(l[2], `"account":"alice"`, `"account":"bob"`, 1)
		return append([]string{l[0], "", l[1]}, l[2:]...)
	}, 4)
	tamper(t, "first line removed", func(l []string) []string { return l[1:] }, 1)
	tamper(t, "garbage line", func(l []string) []string { l[3] = "{not json"; return l }, 4)
	tamper(t, "rehash without chain", func(l []string) []string {
		// Re-seal an edited entry with a correct hash over the wrong prev.
		e := Entry{Seq: 4, Event: ToolCall, Account: "mallory", Prev: strings.Repeat("0", 64)}
		line, _, _ := seal(e)
		l[3] = strings.TrimSpace(string(line))
		return l
	}, 4)
}

func TestConcurrentAppendKeepsChain(t *testing.T) {
	dir := t.TempDir()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _ := Open(dir) // separate Log values, as separate processes would have
			appendN(t, l, each)
		}()
	}
	wg.Wait()
	l, _ := Open(dir)
	res, err := l.Verify()
	if err != nil || !res.OK || res.Lines != writers*each {
		t.Fatalf("verify = %+v, %v", res, err)
	}
}

func TestReadFilterAndDetailClip(t *testing.T) {
	l, _ := Open(t.TempDir())
	ctx := context.Background()
	l.Append(ctx, Entry{Event: SessionStart, Instance: "a", Level: "observe"})
	l.Append(ctx, Entry{Event: ToolCall, Instance: "b", Level: "full", Agent: "3f9a1c", Detail: strings.Repeat("é", 1000)})
	l.Append(ctx, Entry{Event: SessionEnd, Instance: "a", Level: "observe"})
	got, err := l.Read(Filter{Instance: "a"})
	if err != nil || len(got) != 2 || got[0].Event != SessionStart || got[1].Event != SessionEnd {
		t.Fatalf("filter instance: %+v %v", got, err)
	}
	got, _ = l.Read(Filter{Level: "full"})
	if len(got) != 1 || len(got[0].Detail) > maxDetail+4 {
		t.Fatalf("filter level / clip: %d entries, detail %d bytes", len(got), len(got[0].Detail))
	}
	if got, _ = l.Read(Filter{Agent: "3f9a1c"}); len(got) != 1 || got[0].Instance != "b" {
		t.Fatalf("filter agent: %+v", got)
	}
	got, _ = l.Read(Filter{Since: time.Now().Add(time.Hour)})
	if len(got) != 0 {
		t.Fatalf("since in the future matched %d", len(got))
	}
	got, _ = l.Read(Filter{Limit: 1})
	if len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("limit keeps the newest: %+v", got)
	}
}

func TestVerifyEmptyAndMissing(t *testing.T) {
	l, _ := Open(t.TempDir())
	if res, err := l.Verify(); err != nil || !res.OK || res.Lines != 0 {
		t.Fatalf("missing log: %+v %v", res, err)
	}
	if res, err := Verify(bytes.NewReader(nil)); err != nil || !res.OK {
		t.Fatalf("empty: %+v %v", res, err)
	}
}

func TestAppendRefusesCorruptTail(t *testing.T) {
	l, _ := Open(t.TempDir())
	appendN(t, l, 1)
	f, _ := os.OpenFile(l.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{broken\n")
	f.Close()
	if _, err := l.Append(context.Background(), Entry{Event: ToolCall}); err == nil || !strings.Contains(err.Error(), "audit verify") {
		t.Fatalf("append after corrupt tail: %v", err)
	}
}

// Entries cut off the end leave an intact chain; the head notices.
func TestTruncationDetectedByHead(t *testing.T) {
	l, _ := Open(t.TempDir())
	appendN(t, l, 5)
	data, _ := os.ReadFile(l.Path())
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if err := os.WriteFile(l.Path(), []byte(strings.Join(lines[:3], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, _ := Verify(strings.NewReader(strings.Join(lines[:3], ""))); !res.OK {
		t.Fatal("the cut chain alone should still verify (that is why the head exists)")
	}
	res, err := l.Verify()
	if err != nil || res.OK || !strings.Contains(res.Reason, "2 entries were removed from the end") || res.BrokenLine != 4 {
		t.Fatalf("truncated log: %+v %v", res, err)
	}
	// The whole log deleted.
	os.Remove(l.Path())
	if res, err := l.Verify(); err != nil || res.OK {
		t.Fatalf("deleted log: %+v %v", res, err)
	}
	// An intact log agrees with its head.
	l2, _ := Open(t.TempDir())
	appendN(t, l2, 2)
	if res, err := l2.Verify(); err != nil || !res.OK {
		t.Fatalf("intact log with head: %+v %v", res, err)
	}
}

// The head is rewritten in place at a fixed size; one an older stem wrote
// (compact JSON, made by rename) is taken over, and either form verifies.
func TestHeadRewrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir)
	appendN(t, l, 2)
	hp := filepath.Join(dir, "audit.head")
	data, _ := os.ReadFile(hp)
	var h Head
	if err := json.Unmarshal(data, &h); err != nil || h.Seq != 2 {
		t.Fatalf("head %q: %+v %v", data, h, err)
	}
	if len(data) != headSize {
		t.Fatalf("head is %d bytes, want %d", len(data), headSize)
	}
	old, _ := json.Marshal(h)
	os.WriteFile(hp, append(old, '\n'), 0o600)
	if res, err := l.Verify(); err != nil || !res.OK {
		t.Fatalf("log with an old-style head: %+v %v", res, err)
	}
	appendN(t, l, 1)
	data, _ = os.ReadFile(hp)
	if err := json.Unmarshal(data, &h); err != nil || h.Seq != 3 || len(data) != headSize {
		t.Fatalf("head after an append over an old-style one: %q (%d bytes) %v", data, len(data), err)
	}
	if res, err := l.Verify(); err != nil || !res.OK {
		t.Fatalf("log after the head was taken over: %+v %v", res, err)
	}
}
