// Package decision is the host side of every decision that belongs to the
// student: an agent's request that waits for their yes, a proposal they
// accept. A question is asked and answered through a directory on the
// host, <state dir>/decisions/<instance>/, which no container mounts:
// the container may run code an agent caused, so it may show a question
// (stem-mcp tells its tmux) but can never answer one.
//
// Only host programs running as the student write there: stem-mcp (and
// the gate) asks, and an input the student uses on the host answers —
// `stemctl attach`'s host line, `stemctl approvals`. Each answer names that
// input, and each question is answered once: the answer file is made with
// link(2), which fails when one exists, and the asker removes both files
// when it has read the answer.
//
// Files:
//
//	q-<id>.json   an open question (written whole: temporary file + rename)
//	a-<id>.json   its answer
//	w-<pid>.json  a host input that is showing the questions now (Present)
package decision

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/filelock"
)

// Choice is an answer's value.
type Choice string

const (
	Yes Choice = "yes"
	No  Choice = "no"
	// While is "allow every request of this client for a while"; an
	// input asks once more before it sends it.
	While Choice = "while"
)

// Question is one open question.
type Question struct {
	ID       string    `json:"id"`
	Instance string    `json:"instance"`
	Kind     string    `json:"kind"` // "approval", "proposal", ...
	From     string    `json:"from"` // who asks: "agent codex", "teacher kowalska"
	Text     string    `json:"text"` // one line, already sanitized by the asker
	Choices  []Choice  `json:"choices"`
	Asked    time.Time `json:"asked"`
	Expires  time.Time `json:"expires"`
}

// Offers reports whether c is one of q's choices.
func (q Question) Offers(c Choice) bool { return slices.Contains(q.Choices, c) }

// Answer is the student's answer to one question.
type Answer struct {
	ID     string    `json:"id"`
	Choice Choice    `json:"choice"`
	Input  string    `json:"input"` // the host input that gave it
	At     time.Time `json:"at"`
}

// Errors an answerer or asker acts on.
var (
	// ErrNotPending: the question is gone (answered, expired, withdrawn)
	// or never was.
	ErrNotPending = errors.New("no such open question (answered, expired or withdrawn)")
	// ErrNobodyToAsk: no host input is showing this instance's questions.
	ErrNobodyToAsk = errors.New("the student has no stem terminal open on the host to answer (`stemctl attach` shows questions; `stemctl approvals` answers them)")
)

// maxFile bounds what is read from the directory.
const maxFile = 64 << 10

// askPoll is how often Ask looks for its answer: one stat each.
const askPoll = 2 * time.Millisecond

// Spool is one instance's question directory.
type Spool struct {
	dir      string
	instance string
}

// Open makes (if needed) and opens the question directory of instance
// under stateDir.
func Open(stateDir, instance string) (*Spool, error) {
	if instance == "" || strings.ContainsAny(instance, "/\x00") || strings.HasPrefix(instance, ".") {
		return nil, fmt.Errorf("decisions: bad instance name %q", instance)
	}
	dir := filepath.Join(stateDir, "decisions", instance)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("decisions: %s is not a private directory (want mode 0700): remove it and try again", dir)
	}
	return &Spool{dir: dir, instance: instance}, nil
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// NewID is a random question id.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func (s *Spool) qpath(id string) string { return filepath.Join(s.dir, "q-"+id+".json") }
func (s *Spool) apath(id string) string { return filepath.Join(s.dir, "a-"+id+".json") }

// Ask puts q to the student and waits for the answer until ctx ends or
// q expires (context.DeadlineExceeded). A missing ID, Asked or Instance
// is filled in. It fails at once with ErrNobodyToAsk when no host input
// is Present. The question and its answer are removed either way.
func (s *Spool) Ask(ctx context.Context, q Question) (Answer, error) {
	if len(s.Present()) == 0 {
		return Answer{}, ErrNobodyToAsk
	}
	if q.ID == "" {
		q.ID = NewID()
	}
	if !validID(q.ID) {
		return Answer{}, fmt.Errorf("decisions: bad question id %q", q.ID)
	}
	if q.Asked.IsZero() {
		q.Asked = time.Now().UTC()
	}
	q.Instance = s.instance
	if len(q.Choices) == 0 {
		q.Choices = []Choice{Yes, No}
	}
	if !q.Expires.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, q.Expires)
		defer cancel()
	}
	data, err := json.Marshal(q)
	if err != nil {
		return Answer{}, err
	}
	if err := writeAtomic(s.dir, s.qpath(q.ID), data); err != nil {
		return Answer{}, fmt.Errorf("decisions: ask: %w", err)
	}
	defer os.Remove(s.apath(q.ID))
	defer os.Remove(s.qpath(q.ID))
	t := time.NewTicker(askPoll)
	defer t.Stop()
	for {
		a, err := s.readAnswer(q)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return Answer{}, err
		}
		select {
		case <-ctx.Done():
			// Withdraw the question under the lock an answer is made
			// under: an answer is either seen here or never made.
			unlock, lerr := s.lock()
			if lerr != nil {
				return Answer{}, lerr
			}
			os.Remove(s.qpath(q.ID))
			a, err := s.readAnswer(q)
			unlock()
			if err == nil {
				return a, nil
			}
			return Answer{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Spool) readAnswer(q Question) (Answer, error) {
	data, err := readBounded(s.apath(q.ID))
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := json.Unmarshal(data, &a); err != nil {
		return Answer{}, fmt.Errorf("decisions: unreadable answer to %s: %w", q.ID, err)
	}
	if a.ID != q.ID || !q.Offers(a.Choice) {
		return Answer{}, fmt.Errorf("decisions: the answer to %s does not fit its question", q.ID)
	}
	return a, nil
}

// Pending is the open, unexpired questions, oldest first. Expired ones
// left by an asker that died are removed.
func (s *Spool) Pending() ([]Question, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	now := time.Now()
	var qs []Question
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutPrefix(name, "q-")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, ok = strings.CutSuffix(id, ".json")
		if !ok || !validID(id) {
			continue
		}
		data, err := readBounded(filepath.Join(s.dir, name))
		if err != nil {
			continue // answered and removed meanwhile
		}
		var q Question
		if json.Unmarshal(data, &q) != nil || q.ID != id {
			continue
		}
		if !q.Expires.IsZero() && now.After(q.Expires.Add(time.Minute)) {
			os.Remove(filepath.Join(s.dir, name))
			os.Remove(s.apath(id))
			continue
		}
		if !q.Expires.IsZero() && now.After(q.Expires) {
			continue
		}
		if _, err := os.Lstat(s.apath(id)); err == nil {
			continue // answered, not yet collected
		}
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b Question) int { return a.Asked.Compare(b.Asked) })
	return qs, nil
}

// Question is the open question id.
func (s *Spool) Question(id string) (Question, error) {
	if !validID(id) {
		return Question{}, ErrNotPending
	}
	data, err := readBounded(s.qpath(id))
	if err != nil {
		return Question{}, ErrNotPending
	}
	var q Question
	if json.Unmarshal(data, &q) != nil || q.ID != id {
		return Question{}, ErrNotPending
	}
	if !q.Expires.IsZero() && time.Now().After(q.Expires) {
		return Question{}, ErrNotPending
	}
	return q, nil
}

// Answer records a's answer to its open question, once: ErrNotPending
// when the question is gone or already answered, an error when a's choice
// is not one the question offers.
func (s *Spool) Answer(a Answer) error {
	q, err := s.Question(a.ID)
	if err != nil {
		return err
	}
	if !q.Offers(a.Choice) {
		return fmt.Errorf("decisions: %q is not an answer to this question (it offers %v)", a.Choice, q.Choices)
	}
	if a.At.IsZero() {
		a.At = time.Now().UTC()
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(s.dir, data)
	if err != nil {
		return fmt.Errorf("decisions: answer: %w", err)
	}
	defer os.Remove(tmp)
	// Under the lock the asker withdraws a question under: while the
	// question is still there, the answer made here is the one it reads.
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Lstat(s.qpath(a.ID)); err != nil {
		return ErrNotPending
	}
	if err := os.Link(tmp, s.apath(a.ID)); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ErrNotPending
		}
		return fmt.Errorf("decisions: answer: %w", err)
	}
	return nil
}

// lock serializes making an answer with withdrawing its question.
func (s *Spool) lock() (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unlock, err := filelock.Lock(ctx, filepath.Join(s.dir, ".lock"), filelock.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	return unlock, nil
}

// Watch sends the pending list each time it changes (and once at the
// start) until ctx ends.
func (s *Spool) Watch(ctx context.Context) <-chan []Question {
	ch := make(chan []Question, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		var last []string
		first := true
		for {
			qs, err := s.Pending()
			if err == nil {
				ids := make([]string, len(qs))
				for i, q := range qs {
					ids[i] = q.ID
				}
				if first || !slices.Equal(ids, last) {
					first, last = false, ids
					select {
					case ch <- qs:
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxFile {
		return nil, fmt.Errorf("decisions: %s is not a question file", path)
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, err
	}
	return buf, nil
}

func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func writeAtomic(dir, path string, data []byte) error {
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
