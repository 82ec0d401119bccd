// Package audit appends hash-chained JSON lines: every MCP session (start,
// end), every effectful call (an intent before it runs, its outcome after)
// and every refusal. Each line carries the hash of
// the previous line, so an edited, removed or reordered line breaks the chain
// at that point and `stemctl audit verify` names it; a head file beside the
// log records the last entry, so entries cut off the end are noticed too.
//
// The log lives in the student's account, so the chain is tamper-evidence
// against accidents and casual edits, not against that account's owner.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/filelock"
)

// Events.
const (
	SessionStart = "session_start"
	SessionEnd   = "session_end"
	// ToolIntent is written before an effectful call runs; the call does
	// not run unless it was written. Its outcome follows as a ToolCall (or
	// Refused) entry whose Intent is the intent's Seq. An intent with no
	// outcome is a call that was still running when the log was read, or
	// whose server ended (was killed) during it: it may have acted.
	ToolIntent = "tool_intent"
	// ToolCall is an effectful call's outcome (Result ok or error). Logs
	// written before intents existed have it alone, with no Intent.
	ToolCall = "tool_call"
	Refused  = "refused"
	Select   = "select"
	Grant    = "grant"
	Revoke   = "revoke"
	Agent    = "agent"
	// ApprovalRequest is a call waiting for the student's yes or no;
	// ApprovalDecision (Result granted or denied) and ApprovalExpired
	// close it (Intent is the request's Seq).
	ApprovalRequest  = "approval_request"
	ApprovalDecision = "approval_decision"
	ApprovalExpired  = "approval_expired"
	// ProposalCreate is an edit proposed to the student instead of made
	// (the task's policy is edits = "propose"); ProposalDecision is its
	// outcome as the proposer's server learned it from the editor (Result
	// accepted, partially_accepted, rejected, stale, or open when the
	// proposer's session ended first; Intent is the creation's Seq).
	ProposalCreate   = "proposal_create"
	ProposalDecision = "proposal_decision"
)

// maxDetail bounds free text so one line can never grow without limit.
const maxDetail = 512

// Entry is one audit line. Hash is computed on write.
type Entry struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Account string    `json:"account"`
	Grant   string    `json:"grant,omitempty"`
	KeyFP   string    `json:"key_fingerprint,omitempty"`
	Client  string    `json:"client,omitempty"` // SSH client address
	// Agent is the id `stemctl agent start` gave the agent whose MCP server
	// this is (a label the local account sets, not a credential).
	Agent       string `json:"agent,omitempty"`
	Session     string `json:"session,omitempty"`
	Instance    string `json:"instance,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	Level       string `json:"level,omitempty"`
	Tool        string `json:"tool,omitempty"`
	ArgsDigest  string `json:"args_digest,omitempty"`
	Result      string `json:"result,omitempty"` // ok, error, refused
	Detail      string `json:"detail,omitempty"`
	// Intent is, on an outcome, the Seq of the tool_intent it closes.
	Intent int64 `json:"intent,omitempty"`
	// Duration is how long an effectful call ran (Go duration text).
	Duration string `json:"duration,omitempty"`
	Prev     string `json:"prev"`
	Hash     string `json:"hash,omitempty"`
}

// Digest returns a stable digest of tool arguments (sha256 of their JSON).
func Digest(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(fmt.Sprintf("%v", v))
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Log is an append-only audit file with a lock file beside it.
type Log struct {
	path string
	lock string
	now  func() time.Time
}

// Open returns the log at dir/audit.jsonl (dir is created 0700).
func Open(dir string) (*Log, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create audit directory %s: %w", dir, err)
	}
	return &Log{path: filepath.Join(dir, "audit.jsonl"), lock: filepath.Join(dir, "audit.lock"), now: time.Now}, nil
}

// Path is the log file.
func (l *Log) Path() string { return l.path }

func (l *Log) withLock(ctx context.Context, fn func() error) error {
	unlock, err := filelock.Lock(ctx, l.lock, filelock.Exclusive)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// WriteError is an entry that could not be appended, or a log that
// cannot take one (Check). Whoever acts on an audited request must not act
// when they get one: auditing fails closed.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("the audit log %s cannot be written (%v): run `stemctl audit verify` to find the broken line; to start a new log, move %s and %s aside (keep them as the record)",
		e.Path, e.Err, filepath.Base(e.Path), filepath.Base(headPath(e.Path)))
}

func (e *WriteError) Unwrap() error { return e.Err }

// Append writes e as the next line of the chain and returns it as written.
// Its errors are *WriteError.
func (l *Log) Append(ctx context.Context, e Entry) (Entry, error) {
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
	}
	e.Detail = clip(e.Detail, maxDetail)
	err := l.withLock(ctx, func() error {
		f, last, err := l.openTail()
		if err != nil {
			return err
		}
		defer f.Close()
		e.Seq, e.Prev = last.Seq+1, last.Hash
		line, h, err := seal(e)
		if err != nil {
			return err
		}
		e.Hash = h
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		if _, err := f.Write(line); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		return writeHead(l.path, Head{Seq: e.Seq, Hash: e.Hash})
	})
	if err != nil {
		return e, &WriteError{Path: l.path, Err: err}
	}
	return e, nil
}

// Check reports whether an entry could be appended now (the lock can be
// taken, the log opened for writing, its last line read) without writing
// or creating anything but the lock. Its errors are *WriteError. A server
// checks before it answers a client, so a log that cannot be written
// refuses the session at once.
func (l *Log) Check(ctx context.Context) error {
	err := l.withLock(ctx, func() error {
		if _, err := os.Lstat(l.path); errors.Is(err, os.ErrNotExist) {
			return nil // the first append creates it
		}
		f, _, err := l.openTail()
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		return &WriteError{Path: l.path, Err: err}
	}
	return nil
}

// openTail opens the log for appending (the lock held) and returns the
// last entry (zero for an empty log).
func (l *Log) openTail() (*os.File, Entry, error) {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, Entry{}, err
	}
	last, err := lastLine(f)
	if err != nil {
		f.Close()
		return nil, Entry{}, err
	}
	var prev Entry
	if len(last) > 0 {
		if err := json.Unmarshal(last, &prev); err != nil {
			f.Close()
			return nil, Entry{}, fmt.Errorf("last line is not valid JSON (%v)", err)
		}
		if len(prev.Hash) != 64 || prev.Seq < 1 {
			f.Close()
			return nil, Entry{}, errors.New("last line is not an audit entry (no seq or hash)")
		}
	}
	return f, prev, nil
}

// Head records where the chain ended at the last append. The chain alone
// cannot show that entries were cut off its end; the head can, as long as
// it was not rewritten along with them.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// headPath is the head file kept next to a log named audit.jsonl.
func headPath(logPath string) string {
	return filepath.Join(filepath.Dir(logPath), "audit.head")
}

// headSize is the head file's fixed length: the JSON padded with spaces.
// The head is rewritten in place with one write of one sector (creating a
// file and renaming it over the old one cost about 0.7 ms of each append's
// 0.9 ms here), so a reader never sees a shorter or longer file.
const headSize = 128

func writeHead(logPath string, h Head) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(data) >= headSize {
		return fmt.Errorf("write audit head: %d bytes do not fit in %d", len(data), headSize)
	}
	buf := bytes.Repeat([]byte{' '}, headSize)
	copy(buf, data)
	buf[headSize-1] = '\n'
	f, err := os.OpenFile(headPath(logPath), os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("write audit head: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("write audit head: %w", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != headSize {
		// A head written by an older stem (shorter, made by rename).
		if err := f.Truncate(headSize); err != nil {
			return fmt.Errorf("write audit head: %w", err)
		}
	}
	return nil
}

// CheckHead compares an intact chain read from logPath with the head file
// beside it (only for a log named audit.jsonl; a copy elsewhere has none).
// A chain shorter than its head lost entries at the end; one of the same
// length with another last hash had its last entry replaced. A chain longer
// than the head is fine: a crash can fall between the append and the head.
func CheckHead(logPath string, res VerifyResult) VerifyResult {
	if !res.OK || filepath.Base(logPath) != "audit.jsonl" {
		return res
	}
	f, err := os.OpenFile(headPath(logPath), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return res
	}
	defer f.Close()
	var h Head
	if err := json.NewDecoder(io.LimitReader(f, 4096)).Decode(&h); err != nil {
		res.OK, res.BrokenLine, res.Reason = false, res.Lines+1, "the head file beside the log is not valid: "+err.Error()
		return res
	}
	switch {
	case h.Seq > res.LastSeq:
		res.OK, res.BrokenLine = false, res.Lines+1
		res.Reason = fmt.Sprintf("the log ends at seq %d but its head records seq %d: %d entries were removed from the end", res.LastSeq, h.Seq, h.Seq-res.LastSeq)
	case h.Seq == res.LastSeq && h.Hash != res.LastHash:
		res.OK, res.BrokenLine = false, res.Lines
		res.Reason = "the last entry differs from the one the head records (it was replaced)"
	}
	return res
}

// seal returns the line (with hash, newline-terminated) and the hash. The
// hash is sha256(prev || body) where body is the entry's JSON without hash;
// the hash is appended as the last key so a verifier can cut it off again.
func seal(e Entry) ([]byte, string, error) {
	e.Hash = ""
	body, err := json.Marshal(e)
	if err != nil {
		return nil, "", fmt.Errorf("encode audit entry: %w", err)
	}
	h := chainHash(e.Prev, body)
	line := make([]byte, 0, len(body)+80)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, h...)
	line = append(line, "\"}\n"...)
	return line, h, nil
}

func chainHash(prev string, body []byte) string {
	s := sha256.New()
	s.Write([]byte(prev))
	s.Write([]byte{'\n'})
	s.Write(body)
	return hex.EncodeToString(s.Sum(nil))
}

// lastLine returns the last non-empty line of f (reading backwards in
// chunks) without its newline.
func lastLine(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat audit log: %w", err)
	}
	size := fi.Size()
	if size == 0 {
		return nil, nil
	}
	const chunk = 8192
	var tail []byte
	for off := size; off > 0; {
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		tail = append(buf, tail...)
		trimmed := bytes.TrimRight(tail, "\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 {
			return trimmed[i+1:], nil
		}
		if off == 0 {
			return trimmed, nil
		}
		if len(tail) > 1<<20 {
			return nil, errors.New("audit log: last line is over 1 MiB")
		}
	}
	return nil, nil
}

// VerifyResult reports a verification.
type VerifyResult struct {
	Lines      int    `json:"lines"` // entries read (blank lines are not counted)
	OK         bool   `json:"ok"`
	BrokenLine int    `json:"broken_line,omitempty"` // 1-based line number in the file
	Reason     string `json:"reason,omitempty"`
	LastHash   string `json:"last_hash,omitempty"`
	LastSeq    int64  `json:"last_seq,omitempty"`
	// Unfinished are the effectful calls whose intent has no outcome (up
	// to maxUnfinished of them, oldest first; UnfinishedCount counts all).
	// They do not break the chain: a call may still be running, or its
	// server ended during it, and then it may have acted.
	Unfinished      []Unfinished `json:"unfinished,omitempty"`
	UnfinishedCount int          `json:"unfinished_count,omitempty"`
	Description     string       `json:"-"`
}

// Unfinished is an intent without an outcome.
type Unfinished struct {
	Line     int       `json:"line"`
	Seq      int64     `json:"seq"`
	Time     time.Time `json:"time"`
	Tool     string    `json:"tool"`
	Session  string    `json:"session,omitempty"`
	Instance string    `json:"instance,omitempty"`
}

// maxUnfinished bounds the unfinished calls a VerifyResult lists.
const maxUnfinished = 20

// Verify reads the whole chain from r and reports the first broken line.
func Verify(r io.Reader) (VerifyResult, error) {
	dec := newLineReader(r)
	var res VerifyResult
	prevHash, prevSeq, prevLine := "", int64(0), 0
	open := map[int64]Unfinished{}
	for {
		line, err := dec.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		res.Lines++
		n := dec.n
		fail := func(reason string) (VerifyResult, error) {
			res.OK, res.BrokenLine, res.Reason = false, n, reason
			return res, nil
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return fail("not valid JSON: " + err.Error())
		}
		suffix := []byte(`,"hash":"` + e.Hash + "\"}")
		if len(e.Hash) != 64 || !bytes.HasSuffix(line, suffix) {
			return fail("the hash is missing or not the last field")
		}
		body := append(append([]byte{}, line[:len(line)-len(suffix)]...), '}')
		if e.Prev != prevHash {
			if prevLine == 0 {
				return fail("the first entry names a previous line (lines before it were removed)")
			}
			return fail(fmt.Sprintf("prev does not match the hash of line %d (a line was removed, reordered or edited)", prevLine))
		}
		if e.Seq != prevSeq+1 {
			return fail(fmt.Sprintf("seq %d follows seq %d", e.Seq, prevSeq))
		}
		if chainHash(e.Prev, body) != e.Hash {
			return fail("the line's content does not match its hash (it was edited)")
		}
		prevHash, prevSeq, prevLine = e.Hash, e.Seq, n
		switch {
		case e.Event == ToolIntent:
			open[e.Seq] = Unfinished{Line: n, Seq: e.Seq, Time: e.Time, Tool: e.Tool, Session: e.Session, Instance: e.Instance}
		case e.Intent != 0:
			delete(open, e.Intent)
		}
	}
	res.OK = true
	res.LastHash, res.LastSeq = prevHash, prevSeq
	res.UnfinishedCount = len(open)
	for _, u := range open {
		res.Unfinished = append(res.Unfinished, u)
	}
	sort.Slice(res.Unfinished, func(i, j int) bool { return res.Unfinished[i].Seq < res.Unfinished[j].Seq })
	if len(res.Unfinished) > maxUnfinished {
		res.Unfinished = res.Unfinished[:maxUnfinished]
	}
	return res, nil
}

// Verify verifies the log and its head. A log not written yet is intact
// unless its head says otherwise (the log was deleted).
func (l *Log) Verify() (VerifyResult, error) {
	// Shared with other readers, but not with an append: one that fell
	// between reading the log and its head would look like lost entries.
	// Best effort: a log in a directory the reader cannot write, or a
	// writer stuck holding the lock, still gets verified.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	unlock, err := filelock.Lock(ctx, l.lock, filelock.Shared)
	cancel()
	if err == nil {
		defer unlock()
	}
	res, err := VerifyFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return CheckHead(l.path, VerifyResult{OK: true}), nil
	}
	return res, err
}

// VerifyFile verifies the log at path (Verify) and the head beside it
// (CheckHead). A missing file is an error wrapping os.ErrNotExist.
func VerifyFile(path string) (VerifyResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	res, err := Verify(f)
	if err != nil {
		return res, err
	}
	return CheckHead(path, res), nil
}

// Filter selects entries for Show. Zero fields match everything.
type Filter struct {
	Instance string
	Level    string
	Event    string
	Account  string
	Agent    string
	Since    time.Time
	Until    time.Time
	// Unfinished keeps only intents with no outcome in the log.
	Unfinished bool
	Limit      int // keep the last Limit matches
}

func (f Filter) match(e Entry) bool {
	switch {
	case f.Unfinished && e.Event != ToolIntent:
		return false
	case f.Instance != "" && e.Instance != f.Instance,
		f.Level != "" && e.Level != f.Level,
		f.Event != "" && e.Event != f.Event,
		f.Account != "" && e.Account != f.Account,
		f.Agent != "" && e.Agent != f.Agent,
		!f.Since.IsZero() && e.Time.Before(f.Since),
		!f.Until.IsZero() && e.Time.After(f.Until):
		return false
	}
	return true
}

// Read returns the entries matching f, oldest first. Unparseable lines are
// skipped (Verify reports them).
func (l *Log) Read(f Filter) ([]Entry, error) {
	fh, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer fh.Close()
	lr := newLineReader(fh)
	var out []Entry
	closed := map[int64]bool{}
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Intent != 0 {
			closed[e.Intent] = true
		}
		if f.match(e) {
			out = append(out, e)
		}
	}
	if f.Unfinished {
		out = slices.DeleteFunc(out, func(e Entry) bool { return closed[e.Seq] })
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, nil
}

// UnfinishedSeqs returns the Seq of every intent in the log that has no
// outcome (see ToolIntent).
func (l *Log) UnfinishedSeqs() (map[int64]bool, error) {
	es, err := l.Read(Filter{Unfinished: true})
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(es))
	for _, e := range es {
		out[e.Seq] = true
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
