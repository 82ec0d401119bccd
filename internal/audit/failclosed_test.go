package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oldLog is a log written by stem before intents existed (generated with
// the previous audit.go): it must still verify, and take new entries.
const oldLog = `{"seq":1,"time":"2026-11-02T10:00:00Z","event":"session_start","account":"anna","session":"0a1b2c3d4e5f","instance":"native-amd64-inf-bss-t4","container_id":"c0ffee","level":"assist","result":"ok","prev":"","hash":"35c1791a4b0b380bde81daacb6b738f701136d0266945442e7044111d1465ff8"}
{"seq":2,"time":"2026-11-02T10:00:01Z","event":"tool_call","account":"anna","session":"0a1b2c3d4e5f","instance":"native-amd64-inf-bss-t4","container_id":"c0ffee","level":"assist","tool":"nvim_hint","args_digest":"sha256:1e47a62b45feaf59b191732ee2d30a3ca353b2d7cfe9f4679c8090330f40ce76","result":"ok","prev":"35c1791a4b0b380bde81daacb6b738f701136d0266945442e7044111d1465ff8","hash":"dfa1f0bbb9e2a67c97a2506c8c48efc37890239452d153ec01ec207eb8d959d8"}
{"seq":3,"time":"2026-11-02T10:00:02Z","event":"refused","account":"anna","session":"0a1b2c3d4e5f","level":"assist","tool":"pane_send_keys","result":"refused","detail":"not allowed","prev":"dfa1f0bbb9e2a67c97a2506c8c48efc37890239452d153ec01ec207eb8d959d8","hash":"0749fd1a1c4551e4448a5752912b493c17ebfd14c86cc60bf40d76ef6707c9af"}
{"seq":4,"time":"2026-11-02T10:00:03Z","event":"session_end","account":"anna","session":"0a1b2c3d4e5f","level":"assist","result":"ok","detail":"duration 1s","prev":"0749fd1a1c4551e4448a5752912b493c17ebfd14c86cc60bf40d76ef6707c9af","hash":"6d9e3b2f6e0ace7c3275e773a5047a9d64d28bddaa64ce216cb5203cabf02d1a"}
`

const oldHead = `{"seq":4,"hash":"6d9e3b2f6e0ace7c3275e773a5047a9d64d28bddaa64ce216cb5203cabf02d1a"}` + "\n"

func TestOldLogStillVerifiesAndExtends(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte(oldLog), 0o600)
	os.WriteFile(filepath.Join(dir, "audit.head"), []byte(oldHead), 0o600)
	l, _ := Open(dir)
	res, err := l.Verify()
	if err != nil || !res.OK || res.Lines != 4 || res.UnfinishedCount != 0 {
		t.Fatalf("old log: %+v %v", res, err)
	}
	in, err := l.Append(context.Background(), Entry{Event: ToolIntent, Tool: "nvim_hint", Level: "assist"})
	if err != nil || in.Seq != 5 {
		t.Fatalf("append an intent to an old log: %+v %v", in, err)
	}
	if _, err := l.Append(context.Background(), Entry{Event: ToolCall, Tool: "nvim_hint", Result: "ok", Intent: in.Seq, Duration: "1.5ms"}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Verify(); err != nil || !res.OK || res.Lines != 6 || res.UnfinishedCount != 0 {
		t.Fatalf("old log with new entries: %+v %v", res, err)
	}
	data, _ := os.ReadFile(l.Path())
	if !strings.HasPrefix(string(data), oldLog) {
		t.Fatal("the old lines changed")
	}
	if !strings.Contains(string(data), `"intent":5,"duration":"1.5ms","prev":"`) {
		t.Fatalf("outcome line: %s", data[len(oldLog):])
	}
}

func TestUnfinishedIntents(t *testing.T) {
	l, _ := Open(t.TempDir())
	ctx := context.Background()
	a, _ := l.Append(ctx, Entry{Event: ToolIntent, Tool: "pane_run", Session: "s1", Instance: "i1"})
	b, _ := l.Append(ctx, Entry{Event: ToolIntent, Tool: "nvim_hint", Session: "s2"})
	l.Append(ctx, Entry{Event: ToolCall, Tool: "nvim_hint", Result: "ok", Intent: b.Seq})
	c, _ := l.Append(ctx, Entry{Event: ToolIntent, Tool: "nvim_buffer_edit", Session: "s2"})
	l.Append(ctx, Entry{Event: Refused, Tool: "nvim_buffer_edit", Result: "refused", Intent: c.Seq})
	res, err := l.Verify()
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	if res.UnfinishedCount != 1 || len(res.Unfinished) != 1 || res.Unfinished[0].Seq != a.Seq || res.Unfinished[0].Line != 1 || res.Unfinished[0].Tool != "pane_run" {
		t.Fatalf("unfinished = %+v", res)
	}
	es, err := l.Read(Filter{Unfinished: true})
	if err != nil || len(es) != 1 || es[0].Seq != a.Seq {
		t.Fatalf("Read unfinished = %+v %v", es, err)
	}
	seqs, _ := l.UnfinishedSeqs()
	if len(seqs) != 1 || !seqs[a.Seq] {
		t.Fatalf("UnfinishedSeqs = %v", seqs)
	}
}

// Check and Append refuse the same logs, as root too: a broken last line,
// a directory or a symlink where the log should be.
func TestCheckAndAppendFailClosed(t *testing.T) {
	ctx := context.Background()
	for name, spoil := range map[string]func(dir string){
		"corrupt tail": func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"seq":2,"trunc` + "\n")
			f.Close()
		},
		"a tail without newline that no entry starts with": func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"event":"x"}`)
			f.Close()
		},
		"valid JSON but no entry": func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("{}\n")
			f.Close()
		},
		"log is a directory": func(dir string) {
			os.Remove(filepath.Join(dir, "audit.jsonl"))
			os.Mkdir(filepath.Join(dir, "audit.jsonl"), 0o700)
		},
		"log is a symlink": func(dir string) {
			os.Remove(filepath.Join(dir, "audit.jsonl"))
			os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "audit.jsonl"))
		},
		"lock is a directory": func(dir string) {
			os.Remove(filepath.Join(dir, "audit.lock"))
			os.Mkdir(filepath.Join(dir, "audit.lock"), 0o700)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := Open(dir)
			appendN(t, l, 1)
			if err := l.Check(ctx); err != nil {
				t.Fatalf("check of a good log: %v", err)
			}
			spoil(dir)
			var we *WriteError
			err := l.Check(ctx)
			if !errors.As(err, &we) || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "stemctl audit verify") {
				t.Fatalf("check: %v", err)
			}
			if _, err := l.Append(ctx, Entry{Event: ToolIntent}); !errors.As(err, &we) {
				t.Fatalf("append: %v", err)
			}
		})
	}
	// A log not written yet is fine, and Check does not create it.
	l, _ := Open(t.TempDir())
	if err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Check created the log: %v", err)
	}
}

// A lock held elsewhere bounds Check and Append by their context.
func TestCheckWaitsForTheLockWithinItsContext(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir)
	release := make(chan struct{})
	held := make(chan struct{})
	go l.withLock(context.Background(), func() error { close(held); <-release; return nil })
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := l.Check(ctx)
	close(release)
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("check under a held lock: %v", err)
	}
}

// BenchmarkAppend is one audited entry: lock, tail read, write, fsync, head.
func BenchmarkAppend(b *testing.B) {
	l, _ := Open(b.TempDir())
	e := Entry{Event: ToolIntent, Account: "anna", Instance: "native-amd64-inf-bss-t4", Level: "assist", Tool: "nvim_hint", ArgsDigest: Digest(1)}
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
}

// A writer killed in the middle of its line (a write to a file can stop
// at a page boundary on SIGKILL) leaves the start of an entry: the next
// session is not refused for it; the next append cuts it off, says so in
// the chain, and the log verifies. The start of an entry after what the
// head records is not taken for one: entries are missing there.
func TestPartialEntryOfAKilledWriterIsCutOff(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, _ := Open(dir)
	appendN(t, l, 2)
	const partial = `{"seq":3,"time":"2026-12-06T13:00:00Z","event":"tool_int`
	f, _ := os.OpenFile(l.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(partial)
	f.Close()
	if res, err := l.Verify(); err != nil || !res.OK || res.Lines != 2 || res.Partial != int64(len(partial)) {
		t.Fatalf("verify with a partial entry: %+v %v", res, err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("check with a partial entry: %v", err)
	}
	e, err := l.Append(ctx, Entry{Event: SessionStart, Account: "anna"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 {
		t.Errorf("the entry after the repair has seq %d, want 4", e.Seq)
	}
	ents, err := l.Read(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 4 || ents[2].Event != LogRepair || !strings.Contains(ents[2].Detail, fmt.Sprintf("removed %d bytes", len(partial))) || ents[3].Event != SessionStart {
		t.Fatalf("entries after the repair: %+v", ents)
	}
	if res, err := l.Verify(); err != nil || !res.OK || res.Partial != 0 || res.Lines != 4 {
		t.Fatalf("verify after the repair: %+v %v", res, err)
	}

	// The head records seq 4; a log cut back to seq 3 with a partial
	// entry after it lost an entry: refused, nothing removed.
	data, _ := os.ReadFile(l.Path())
	cut := data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1]
	os.WriteFile(l.Path(), append(cut, partial...), 0o600)
	err = l.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "head records seq 4") {
		t.Fatalf("check of a log missing an entry before a partial one: %v", err)
	}
	if _, err := l.Append(ctx, Entry{Event: ToolIntent}); err == nil {
		t.Fatal("append to a log missing an entry before a partial one")
	}
	if got, _ := os.ReadFile(l.Path()); string(got) != string(cut)+partial {
		t.Fatal("a refused append changed the log")
	}
	if res, _ := l.Verify(); res.OK || !strings.Contains(res.Reason, "entries were removed") {
		t.Fatalf("verify of a log missing an entry before a partial one: %+v", res)
	}
	// Bytes that start no entry are not set aside by verify either.
	os.WriteFile(l.Path(), append(cut, `{"event":"x"}`...), 0o600)
	if res, _ := l.Verify(); res.OK {
		t.Fatalf("verify of a log ending in a line that is no entry: %+v", res)
	}
}
