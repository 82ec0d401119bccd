package provenance

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
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/chainlog"
	"github.com/stem-edu/stem/internal/lib/filelock"
	"github.com/stem-edu/stem/internal/termtext"
)

// Limits.
const (
	// MaxSnapshotLines is the longest buffer whose line hashes a record
	// keeps; a longer one gets a record without them (NoSnapshot), which
	// blame cannot trace lines through.
	MaxSnapshotLines = 50000
	// MaxSnapshotBytes is the most buffer text a caller should read for a
	// snapshot (it must fit one Neovim reply).
	MaxSnapshotBytes = 3 << 20
	// maxHunkLines bounds the new lines of one change.
	maxHunkLines = 20000
	// maxHunks bounds the hunks of one change.
	maxHunks  = 1000
	maxDetail = 512
)

// Who made a change: the identity of the MCP session, as in the audit log.
type Who struct {
	Account string `json:"account"`
	// Agent is the id `stemctl agent start` gave the agent (a local label).
	Agent string `json:"agent,omitempty"`
	// Grant is the teacher's grant id ("name:g..."), when the change came
	// through the SSH gate.
	Grant   string `json:"grant,omitempty"`
	KeyFP   string `json:"key_fingerprint,omitempty"`
	Level   string `json:"level"`
	Session string `json:"session,omitempty"`
}

// Kind is "teacher" for a change through a teacher's grant, else "agent".
func (w Who) Kind() string {
	if w.Grant != "" {
		return "teacher"
	}
	return "agent"
}

// Label names the writer for a person: "agent 3f9a1c (assist)",
// "teacher kowalska, grant kowalska:g7d92699ecdb99c92 (full)", "MCP client
// of alice (assist)". A grant id begins with the teacher's name (Account
// is the student's local account there).
func (w Who) Label() string {
	switch {
	case w.Grant != "":
		name, _, ok := strings.Cut(w.Grant, ":")
		if !ok {
			name = w.Account
		}
		return fmt.Sprintf("teacher %s, grant %s (%s)", name, w.Grant, w.Level)
	case w.Agent != "":
		return fmt.Sprintf("agent %s (%s)", w.Agent, w.Level)
	default:
		return fmt.Sprintf("MCP client of %s (%s)", w.Account, w.Level)
	}
}

// Hunk replaces lines Start..End (1-based, inclusive, of the text before
// the change; End = Start-1 inserts before Start) with Lines.
type Hunk struct {
	Start, End int
	Lines      []string
}

// Change is one change to record.
type Change struct {
	// Card is the card repository's host path, Path the file's path in
	// it (slash-separated, relative), as stem-mcp resolved them.
	Card, Path string
	Who        Who
	// Tool that made the change (nvim_buffer_edit, or the tool that
	// created an accepted proposal) and the proposal's id, if any.
	Tool, Proposal        string
	Instance, ContainerID string
	// AcceptedBy, for an accepted proposal, is the host decision that
	// accepted it ("the student at stemctl proposals on /dev/pts/5").
	AcceptedBy string
	// Before is the whole buffer before the change, line by line as
	// Neovim holds it. Nil with NoSnapshot (a buffer too long to keep).
	Before     []string
	NoSnapshot bool
	// Hunks are the change, against Before: sorted, not overlapping.
	Hunks []Hunk
	// Pending: the change is about to be made. It counts as made unless
	// an Outcome follows saying it was not (or may not have been).
	Pending bool
}

// record is one line of a provenance file: a change, or the outcome of
// a pending one.
type record struct {
	Seq         int64      `json:"seq"`
	Time        time.Time  `json:"time"`
	Kind        string     `json:"kind"` // "change" or "outcome"
	Card        string     `json:"card"`
	Path        string     `json:"path"`
	Who         *Who       `json:"who,omitempty"`
	Tool        string     `json:"tool,omitempty"`
	Proposal    string     `json:"proposal,omitempty"`
	AcceptedBy  string     `json:"accepted_by,omitempty"`
	Instance    string     `json:"instance,omitempty"`
	ContainerID string     `json:"container_id,omitempty"`
	BeforeLines int        `json:"before_lines,omitempty"`
	BeforeSHA   string     `json:"before_sha256,omitempty"`
	AfterSHA    string     `json:"after_sha256,omitempty"`
	Before      []byte     `json:"before,omitempty"` // packed line hashes
	NoSnapshot  bool       `json:"no_snapshot,omitempty"`
	Hunks       []wireHunk `json:"hunks,omitempty"`
	Pending     bool       `json:"pending,omitempty"`
	// An outcome names the change (its Seq) and says whether it was made.
	Change int64  `json:"change,omitempty"`
	Result Result `json:"result,omitempty"`
	Detail string `json:"detail,omitempty"`
	Prev   string `json:"prev"`
	Hash   string `json:"hash,omitempty"`
}

type wireHunk struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Lines []byte `json:"lines"` // packed line hashes
}

// Log is the account's provenance directory.
type Log struct {
	dir string
	now func() time.Time
}

// Open returns the provenance records under stateDir (the directory of
// the audit log); the directory is created 0700 on the first record.
func Open(stateDir string) *Log {
	return &Log{dir: filepath.Join(stateDir, "provenance"), now: time.Now}
}

// Dir is where the records are.
func (l *Log) Dir() string { return l.dir }

// File is the record file of path in card: one file per card file, named
// by a hash of both so no name from the card reaches the file system.
func (l *Log) File(card, path string) string {
	sum := sha256.Sum256([]byte(card + "\x00" + path))
	return filepath.Join(l.dir, hex.EncodeToString(sum[:16])+".jsonl")
}

// WriteError is a record that could not be written. A caller about to
// make the change must not make it.
type WriteError struct {
	File string
	Err  error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("the provenance record %s cannot be written: %v", e.File, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Result is what became of a pending change that was not simply made.
type Result string

// Results.
const (
	// NotMade: the change was refused before it touched the buffer.
	NotMade Result = "not_made"
	// MaybeMade: the editor did not answer; the change may have been made.
	MaybeMade Result = "maybe_made"
)

// Record appends c and returns its sequence number (for Outcome).
func (l *Log) Record(ctx context.Context, c Change) (int64, error) {
	r, err := c.record()
	if err != nil {
		return 0, err
	}
	return l.append(ctx, r)
}

// Outcome records that a Pending change was not made, or may not have
// been. A change that was made needs none: that costs an edit one fsync'd
// append rather than two.
func (l *Log) Outcome(ctx context.Context, card, path string, change int64, res Result, detail string) error {
	if res != NotMade && res != MaybeMade {
		return fmt.Errorf("provenance: outcome %q: want %q or %q", res, NotMade, MaybeMade)
	}
	r := record{Kind: "outcome", Card: card, Path: path, Change: change, Result: res, Detail: termtext.Clip(detail, maxDetail)}
	_, err := l.append(ctx, r)
	return err
}

func (c Change) record() (record, error) {
	if c.Card == "" || !filepath.IsAbs(c.Card) || c.Path == "" || filepath.IsAbs(c.Path) || strings.Contains(c.Path, "\x00") {
		return record{}, fmt.Errorf("provenance: card %q and path %q: want an absolute card and a relative path", c.Card, c.Path)
	}
	if len(c.Hunks) == 0 || len(c.Hunks) > maxHunks {
		return record{}, fmt.Errorf("provenance: %d hunks (want 1 to %d)", len(c.Hunks), maxHunks)
	}
	if !c.NoSnapshot && len(c.Before) > MaxSnapshotLines {
		c.Before, c.NoSnapshot = nil, true
	}
	if c.NoSnapshot {
		c.Before = nil
	}
	r := record{Kind: "change", Card: c.Card, Path: c.Path, Who: &c.Who, Tool: c.Tool, Proposal: c.Proposal, AcceptedBy: termtext.Clip(c.AcceptedBy, maxDetail),
		Instance: c.Instance, ContainerID: c.ContainerID, NoSnapshot: c.NoSnapshot, Pending: c.Pending}
	total, lastEnd := 0, 0
	for i, h := range c.Hunks {
		if h.Start < 1 || h.End < h.Start-1 || h.Start <= lastEnd || (!c.NoSnapshot && h.End > len(c.Before)) {
			return record{}, fmt.Errorf("provenance: hunk %d (lines %d..%d) is out of order or out of range (%d lines before)", i+1, h.Start, h.End, len(c.Before))
		}
		lastEnd = h.End
		if h.End < h.Start {
			lastEnd = h.Start - 1 // an insertion may touch the next hunk's start
		}
		if total += len(h.Lines); total > maxHunkLines {
			return record{}, fmt.Errorf("provenance: more than %d new lines in one change", maxHunkLines)
		}
		r.Hunks = append(r.Hunks, wireHunk{Start: h.Start, End: h.End, Lines: pack(HashLines(h.Lines))})
	}
	if !c.NoSnapshot {
		r.BeforeLines = len(c.Before)
		r.Before = pack(HashLines(c.Before))
		r.BeforeSHA = textSHA(c.Before)
		r.AfterSHA = textSHA(Apply(c.Before, c.Hunks))
	}
	return r, nil
}

// Apply returns before with the hunks applied (they must be valid for it).
func Apply(before []string, hunks []Hunk) []string {
	var out []string
	at := 0
	for _, h := range hunks {
		out = append(out, before[at:h.Start-1]...)
		out = append(out, h.Lines...)
		at = max(h.End, h.Start-1)
	}
	return append(out, before[at:]...)
}

// textSHA is the sha256 of the lines as a file saved with a final newline.
func textSHA(lines []string) string {
	s := sha256.New()
	for _, l := range lines {
		io.WriteString(s, l)
		s.Write([]byte{'\n'})
	}
	return hex.EncodeToString(s.Sum(nil))
}

// append writes r as the next line of its file's chain.
func (l *Log) append(ctx context.Context, r record) (int64, error) {
	file := l.File(r.Card, r.Path)
	fail := func(err error) (int64, error) { return 0, &WriteError{File: file, Err: err} }
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return fail(err)
	}
	unlock, err := filelock.Lock(ctx, strings.TrimSuffix(file, ".jsonl")+".lock", filelock.Exclusive)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	last, err := lastRecord(f, file)
	if err != nil {
		return fail(err)
	}
	if r.Time.IsZero() {
		r.Time = l.now().UTC()
	}
	r.Seq, r.Prev, r.Hash = last.Seq+1, last.Hash, ""
	body, err := json.Marshal(r)
	if err != nil {
		return fail(err)
	}
	h := chainlog.Hash(r.Prev, body)
	line := append(append(body[:len(body)-1:len(body)-1], `,"hash":"`+h+`"}`...), '\n')
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fail(err)
	}
	if _, err := f.Write(line); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := writeHead(file, head{Seq: r.Seq, Hash: h}); err != nil {
		return fail(err)
	}
	return r.Seq, nil
}

// head records where a file's chain ended at its last append, so records
// cut off the end are noticed.
type head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

func headFile(file string) string { return strings.TrimSuffix(file, ".jsonl") + ".head" }

func writeHead(file string, h head) error {
	data, _ := json.Marshal(h)
	tmp := headFile(file) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the head file: %w", err)
	}
	if err := os.Rename(tmp, headFile(file)); err != nil {
		return fmt.Errorf("write the head file: %w", err)
	}
	return nil
}

// lastRecord reads the last line of f, the log file (the lock held),
// backwards in chunks. A file whose last line is not a record cannot be
// appended to: its chain would not verify and the record would be lost
// in the noise. The start of a record that a writer killed mid-write left
// after it (chainlog.Partial) is cut off: it was never in the chain, as
// long as the head does not record more than the whole records.
func lastRecord(f *os.File, file string) (record, error) {
	partial, err := chainlog.Partial(f, `{"seq":`, maxLineBytes)
	if errors.Is(err, chainlog.ErrNotPartial) {
		return record{}, errors.New("its last line is not a provenance record: move the file aside (keep it as the record) to start a new one")
	}
	if err != nil {
		return record{}, fmt.Errorf("read the last record: %w", err)
	}
	last, err := lastWhole(f, partial)
	if err != nil || partial == 0 {
		return last, err
	}
	var h head
	if data, err := os.ReadFile(headFile(file)); err == nil && json.Unmarshal(data, &h) == nil && h.Seq > last.Seq {
		return record{}, fmt.Errorf("it ends in a partial record after seq %d, but its head records seq %d: records are missing; move the file aside (keep it as the record) to start a new one", last.Seq, h.Seq)
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Truncate(fi.Size() - partial)
	}
	if err != nil {
		return record{}, fmt.Errorf("remove a partial record: %w", err)
	}
	return last, nil
}

// lastWhole is the last record of f before its last skip bytes.
func lastWhole(f *os.File, skip int64) (record, error) {
	tail, err := chainlog.LastLineBefore(f, skip, maxLineBytes)
	if errors.Is(err, chainlog.ErrLongLine) {
		return record{}, errors.New("the last record is longer than any stem writes: move the file aside (keep it as the record) to start a new one")
	}
	if err != nil {
		return record{}, fmt.Errorf("read the last record: %w", err)
	}
	if len(bytes.TrimSpace(tail)) == 0 {
		return record{}, nil
	}
	var r struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(tail, &r); err != nil || r.Seq < 1 || len(r.Hash) != 64 {
		return record{}, errors.New("its last line is not a provenance record: move the file aside (keep it as the record) to start a new one")
	}
	return record{Seq: r.Seq, Hash: r.Hash}, nil
}
