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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/chainlog"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/termtext"
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
	// Consent is the student allowing or disallowing, on the host, keys
	// to a pane or edits to a file; PolicyFloor is the student loosening
	// the agent policy floor (`stemctl policy --loosen`). Detail names
	// the host input that made the change.
	Consent     = "consent"
	PolicyFloor = "policy_floor"
	// ApprovalRequest is a call waiting for the student's yes or no;
	// ApprovalDecision (Result granted or denied) and ApprovalExpired
	// close it (Intent is the request's Seq).
	ApprovalRequest  = "approval_request"
	ApprovalDecision = "approval_decision"
	ApprovalExpired  = "approval_expired"
	// ProposalCreate is an edit proposed to the student instead of made
	// (the task's policy is edits = "propose"); ProposalDecision is the
	// student's decision on it, taken on the host (stemctl proposals, or
	// a host question), with the host input in Detail (Result accepted,
	// partially_accepted, rejected, stale, or pending while hunks remain;
	// Intent is the creation's Seq).
	ProposalCreate   = "proposal_create"
	ProposalDecision = "proposal_decision"
	// LogRepair is the log's own: the start of an entry a writer killed
	// mid-write left at the end was cut off (Detail says how much).
	LogRepair = "log_repair"
)

// Events lists every event above, in that order: what `stemctl audit
// show --event` accepts and completes.
func Events() []string {
	return []string{SessionStart, SessionEnd, ToolIntent, ToolCall, Refused, Select, Grant, Revoke, Agent,
		Consent, PolicyFloor, ApprovalRequest, ApprovalDecision, ApprovalExpired, ProposalCreate, ProposalDecision, LogRepair}
}

// maxDetail bounds free text so one line can never grow without limit.
const maxDetail = 512

// maxLine is longer than any line Append writes: a last line longer than
// this is not an entry.
const maxLine = 1 << 20

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
	dir := filepath.Dir(e.Path)
	switch {
	case errors.Is(e.Err, syscall.ENOSPC), errors.Is(e.Err, syscall.EDQUOT):
		return fmt.Sprintf("the audit log %s cannot be written: the disk holding %s is full (%v); the entry was not written. Free space there (`df -h %s` shows it), then try again: the log continues where it stopped",
			e.Path, dir, e.Err, dir)
	case errors.Is(e.Err, syscall.EROFS):
		return fmt.Sprintf("the audit log %s cannot be written: %s is on a read-only file system (%v); the entry was not written. Make it writable again (`mount -o remount,rw` of the file system holding it), then try again",
			e.Path, dir, e.Err)
	}
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
	e.Detail = termtext.Clip(e.Detail, maxDetail)
	err := l.withLock(ctx, func() error {
		f, last, partial, err := l.openTail()
		if err != nil {
			return err
		}
		defer f.Close()
		if partial > 0 {
			// A writer killed in the middle of its line left its start:
			// it was never in the chain (the head is written after the
			// line). Cut it off and say so in the chain.
			if err := cutPartial(f, partial); err != nil {
				return err
			}
			rep := Entry{Time: e.Time, Event: LogRepair, Account: e.Account, Result: "ok",
				Detail: fmt.Sprintf("removed %d bytes at the end of the log: the start of an entry whose writer ended in the middle of writing it (never part of the chain)", partial)}
			if last, err = appendEntry(f, l.path, last, rep); err != nil {
				return err
			}
		}
		e, err = appendEntry(f, l.path, last, e)
		return err
	})
	if err != nil {
		return e, &WriteError{Path: l.path, Err: err}
	}
	return e, nil
}

// appendEntry writes e after last (the lock held) and records it in the
// head. A failed write leaves the log as it was.
func appendEntry(f *os.File, path string, last, e Entry) (Entry, error) {
	e.Seq, e.Prev = last.Seq+1, last.Hash
	line, h, err := seal(e)
	if err != nil {
		return e, err
	}
	e.Hash = h
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return e, fmt.Errorf("append: %w", err)
	}
	// A full disk can take part of a line: cut it off again, so the
	// chain ends at its last whole entry and the next append (after
	// space is freed) continues it. The entry counts as not written.
	undo := func(err error) error {
		if terr := f.Truncate(end); terr != nil {
			return fmt.Errorf("append: %w; removing the partial line also failed (%v)", err, terr)
		}
		f.Sync()
		return fmt.Errorf("append: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		return e, undo(err)
	}
	if err := f.Sync(); err != nil {
		return e, undo(err)
	}
	if err := writeHead(path, Head{Seq: e.Seq, Hash: e.Hash}); err != nil {
		return e, undo(err)
	}
	return e, nil
}

// cutPartial removes the last n bytes of f, a partial entry.
func cutPartial(f *os.File, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("remove a partial entry: %w", err)
	}
	if err := f.Truncate(fi.Size() - n); err != nil {
		return fmt.Errorf("remove a partial entry: %w", err)
	}
	return f.Sync()
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
		f, _, _, err := l.openTail() // a partial entry is cut off by the append
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
// last entry (zero for an empty log) and the length of a partial entry
// after it (chainlog.Partial), which Append cuts off first. A partial
// entry is only taken for one when the head does not record more than the
// whole entries before it.
func (l *Log) openTail() (*os.File, Entry, int64, error) {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, Entry{}, 0, err
	}
	fail := func(err error) (*os.File, Entry, int64, error) {
		f.Close()
		return nil, Entry{}, 0, err
	}
	partial, err := chainlog.Partial(f, `{"seq":`, maxLine)
	if errors.Is(err, chainlog.ErrNotPartial) {
		return fail(errors.New("last line is not an audit entry (it ends without a newline)"))
	}
	if err != nil {
		return fail(fmt.Errorf("read audit log: %w", err))
	}
	last, err := chainlog.LastLineBefore(f, partial, maxLine)
	if err != nil {
		return fail(fmt.Errorf("read audit log: %w", err))
	}
	var prev Entry
	if len(last) > 0 {
		if err := json.Unmarshal(last, &prev); err != nil {
			return fail(fmt.Errorf("last line is not valid JSON (%v)", err))
		}
		if len(prev.Hash) != 64 || prev.Seq < 1 {
			return fail(errors.New("last line is not an audit entry (no seq or hash)"))
		}
	}
	if partial > 0 {
		if h, err := readHead(l.path); err == nil && h.Seq > prev.Seq {
			return fail(fmt.Errorf("the log ends in a partial entry after seq %d, but its head records seq %d: entries are missing", prev.Seq, h.Seq))
		}
	}
	return f, prev, partial, nil
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
	h := chainlog.Hash(e.Prev, body)
	line := make([]byte, 0, len(body)+80)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"hash":"`...)
	line = append(line, h...)
	line = append(line, "\"}\n"...)
	return line, h, nil
}
