package provenance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/chainlog"
)

// Reader limits: records are host files stem wrote, but the account's
// owner (or a broken disk) can put anything there, so nothing in them
// may cost more than these.
const (
	// maxLineBytes bounds one record (a full snapshot of MaxSnapshotLines
	// hashes is about 1.1 MB of base64).
	maxLineBytes = 4 << 20
	// maxReadBytes is how much of the end of a file blame reads; older
	// records are left out (and said to be).
	maxReadBytes = 256 << 20
	// maxProblems bounds the problems a History lists.
	maxProblems = 50
)

// History is what a file's records say, oldest first.
type History struct {
	File    string
	Changes []Recorded
	// Problems are records that could not be used or whose chain is
	// broken, by line of File. They do not stop the reading.
	Problems     []Problem
	ProblemCount int
	// NotApplied counts changes whose outcome says they were not made
	// (left out of Changes).
	NotApplied int
	// Older: the file is longer than blame reads; its oldest records were
	// not read.
	Older bool
}

// Recorded is one change as read back.
type Recorded struct {
	Seq         int64
	Time        time.Time
	Who         Who
	Tool        string
	Proposal    string
	AcceptedBy  string
	Instance    string
	ContainerID string
	// Before are the line hashes before the change (nil with NoSnapshot).
	Before     []LineHash
	NoSnapshot bool
	Hunks      []HashedHunk
	// Unconfirmed: the editor did not answer the edit, which may or may
	// not have been made; it is taken as made.
	Unconfirmed bool
}

// HashedHunk is a Hunk with the new lines as hashes.
type HashedHunk struct {
	Start, End int
	Lines      []LineHash
}

// Problem is a line of a record file that could not be used, or where
// the chain breaks.
type Problem struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// Read reads the records of path in card. A file with no records is an
// empty History, not an error; only a file that cannot be read at all is.
func (l *Log) Read(card, path string) (*History, error) {
	file := l.File(card, path)
	h := &History{File: file}
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		h.checkHead(0)
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read provenance records: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read provenance records: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read provenance records: %s is not a regular file", file)
	}
	var start int64
	if fi.Size() > maxReadBytes {
		start, h.Older = fi.Size()-maxReadBytes, true
	}
	data := make([]byte, fi.Size()-start)
	n, err := f.ReadAt(data, start)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read provenance records: %w", err)
	}
	data = data[:n]
	if h.Older {
		// Start at the first whole line; its chain link cannot be checked.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	h.parse(data, card, path)
	return h, nil
}

func (h *History) problem(line int, format string, args ...any) {
	h.ProblemCount++
	if len(h.Problems) < maxProblems {
		h.Problems = append(h.Problems, Problem{Line: line, Reason: fmt.Sprintf(format, args...)})
	}
}

func (h *History) parse(data []byte, card, path string) {
	wantCard, wantPath := lossy(card), lossy(path)
	pending := map[int64]int{} // change seq -> index in Changes
	prevHash, lastSeq := "", int64(0)
	first := true
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			continue
		}
		if len(line) > maxLineBytes {
			h.problem(n, "a record of %d bytes, longer than stem writes: skipped", len(line))
			first = false
			continue
		}
		body, hash, ok := splitHash(line)
		if !ok || chainlog.Hash(prevOf(body), body) != hash {
			h.problem(n, "the record does not match its hash (it was changed after it was written): skipped")
			first = false
			continue
		}
		var r record
		body, before, ok := cutBefore(body)
		if !ok {
			h.problem(n, "its line hashes are not base64: skipped")
			first = false
			continue
		}
		if err := json.Unmarshal(body, &r); err != nil {
			h.problem(n, "not a record (%v): skipped", err)
			first = false
			continue
		}
		if !(first && h.Older) && r.Prev != prevHash {
			h.problem(n, "the chain is broken before this record: a record was removed, changed or reordered")
		}
		r.Before = before
		prevHash, lastSeq, first = hash, r.Seq, false
		if r.Card != wantCard || r.Path != wantPath {
			h.problem(n, "the record is about another file (%q): skipped", r.Path)
			continue
		}
		switch r.Kind {
		case "change":
			c, err := r.recorded()
			if err != nil {
				h.problem(n, "%v: skipped", err)
				continue
			}
			if r.Pending {
				pending[c.Seq] = len(h.Changes)
			}
			h.Changes = append(h.Changes, c)
		case "outcome":
			i, ok := pending[r.Change]
			if !ok || (r.Result != NotMade && r.Result != MaybeMade) {
				h.problem(n, "an outcome (%q) of change %d, which is not a pending change before it", r.Result, r.Change)
				continue
			}
			delete(pending, r.Change)
			if r.Result == MaybeMade {
				h.Changes[i].Unconfirmed = true
			} else {
				h.Changes[i].Seq = -1 // dropped below
				h.NotApplied++
			}
		default:
			h.problem(n, "unknown record kind %q: skipped", r.Kind)
		}
	}
	kept := h.Changes[:0]
	for _, c := range h.Changes {
		if c.Seq != -1 {
			kept = append(kept, c)
		}
	}
	h.Changes = kept
	h.checkHead(lastSeq)
}

// checkHead compares the last record read with the head file.
func (h *History) checkHead(lastSeq int64) {
	data, err := readSmall(headFile(h.File))
	if err != nil {
		return
	}
	var hd head
	if err := json.Unmarshal(data, &hd); err != nil {
		h.problem(0, "the head file beside the records is not valid: %v", err)
		return
	}
	if hd.Seq > lastSeq {
		h.problem(0, "the records end at %d but the head file records %d: records were removed from the end", lastSeq, hd.Seq)
	}
}

func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// splitHash cuts the hash off a line written by append: the body is the
// JSON without its last member, ,"hash":"<64 hex>".
func splitHash(line []byte) (body []byte, hash string, ok bool) {
	const tail = len(`,"hash":"`) + 64 + len(`"}`)
	if len(line) < tail+2 || !bytes.HasPrefix(line[len(line)-tail:], []byte(`,"hash":"`)) || !bytes.HasSuffix(line, []byte(`"}`)) {
		return nil, "", false
	}
	hash = string(line[len(line)-tail+len(`,"hash":"`) : len(line)-2])
	body = append(line[:len(line)-tail:len(line)-tail], '}')
	return body, hash, true
}

// cutBefore takes the snapshot out of a body before it is decoded: it is
// nearly all of a record, and base64 decoded here directly costs a tenth
// of what encoding/json takes to validate and decode it. The member can
// only be the object's (a string value cannot hold an unescaped quote).
func cutBefore(body []byte) (rest, before []byte, ok bool) {
	const key = `"before":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return body, nil, true
	}
	v := body[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return nil, nil, false
	}
	before = make([]byte, base64.StdEncoding.DecodedLen(j))
	n, err := base64.StdEncoding.Decode(before, v[:j])
	if err != nil {
		return nil, nil, false
	}
	rest = append(append(body[:i+len(key):i+len(key)], '"'), v[j+1:]...)
	return rest, before[:n], true
}

// prevOf is the "prev" member of a body (the hash covers it; a wrong one
// shows as a broken chain).
func prevOf(body []byte) string {
	var p struct {
		Prev string `json:"prev"`
	}
	i := bytes.LastIndex(body, []byte(`,"prev":"`))
	if i < 0 || json.Unmarshal(append([]byte{'{'}, body[i+1:]...), &p) != nil {
		return ""
	}
	return p.Prev
}

func (r record) recorded() (Recorded, error) {
	c := Recorded{Seq: r.Seq, Time: r.Time, Tool: r.Tool, Proposal: r.Proposal, AcceptedBy: r.AcceptedBy, Instance: r.Instance,
		ContainerID: r.ContainerID, NoSnapshot: r.NoSnapshot}
	if r.Who == nil {
		return c, errors.New("a change without who made it")
	}
	c.Who = *r.Who
	if !r.NoSnapshot {
		b, ok := unpack(r.Before)
		if !ok || len(b) != r.BeforeLines {
			return c, errors.New("its line hashes are not whole")
		}
		c.Before = b
	}
	lastEnd := 0
	for i, wh := range r.Hunks {
		ls, ok := unpack(wh.Lines)
		if !ok || wh.Start < 1 || wh.End < wh.Start-1 || wh.Start <= lastEnd || (!r.NoSnapshot && wh.End > len(c.Before)) {
			return c, fmt.Errorf("hunk %d is not valid", i+1)
		}
		lastEnd = max(wh.End, wh.Start-1)
		c.Hunks = append(c.Hunks, HashedHunk{Start: wh.Start, End: wh.End, Lines: ls})
	}
	if len(c.Hunks) == 0 {
		return c, errors.New("a change without hunks")
	}
	return c, nil
}

// lossy is s as it reads back from JSON (invalid UTF-8 replaced).
func lossy(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}
