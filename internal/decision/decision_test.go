package decision

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func open(t *testing.T) *Spool {
	t.Helper()
	s, err := Open(t.TempDir(), "native-amd64-demo-hello-t1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func attend(t *testing.T, s *Spool) {
	t.Helper()
	release, err := s.Attend("test terminal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

// answerWhenAsked answers the first question that shows with c.
func answerWhenAsked(t *testing.T, s *Spool, c Choice) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for qs := range s.Watch(ctx) {
			if len(qs) > 0 {
				done <- s.Answer(Answer{ID: qs[0].ID, Choice: c, Input: "test terminal"})
				return
			}
		}
		done <- ctx.Err()
	}()
	return done
}

func TestAskAnswerOnce(t *testing.T) {
	t.Parallel()
	s := open(t)
	attend(t, s)
	for _, c := range []Choice{Yes, No, While} {
		done := answerWhenAsked(t, s, c)
		a, err := s.Ask(context.Background(), Question{Kind: "approval", Text: "nvim_hint {}", Choices: []Choice{Yes, No, While}})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if a.Choice != c || a.Input != "test terminal" {
			t.Fatalf("answer %+v, want %s from the test terminal", a, c)
		}
		// Single use: the question and its answer are gone.
		if err := s.Answer(Answer{ID: a.ID, Choice: Yes}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("a second answer to %s: %v", a.ID, err)
		}
		if ents, _ := os.ReadDir(s.Dir()); len(ents) != 1 { // the watcher's file
			t.Fatalf("left behind: %v", ents)
		}
	}
}

func TestAnswerMustBeOffered(t *testing.T) {
	t.Parallel()
	s := open(t)
	attend(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, Question{Text: "x", Choices: []Choice{Yes, No}})
		res <- err
	}()
	var q Question
	for qs := range s.Watch(ctx) {
		if len(qs) > 0 {
			q = qs[0]
			break
		}
	}
	if err := s.Answer(Answer{ID: q.ID, Choice: While}); err == nil {
		t.Fatal("an answer the question does not offer was taken")
	}
	if err := s.Answer(Answer{ID: q.ID, Choice: No}); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

func TestNobodyToAsk(t *testing.T) {
	t.Parallel()
	s := open(t)
	if _, err := s.Ask(context.Background(), Question{Text: "x"}); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("asked with no host input present: %v", err)
	}
	// A watcher whose process has ended does not count.
	dead := Watcher{PID: os.Getpid(), Start: 1, Input: "gone"}
	data, _ := json.Marshal(dead)
	path := filepath.Join(s.Dir(), "w-"+strconv.Itoa(dead.PID)+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ask(context.Background(), Question{Text: "x"}); !errors.Is(err, ErrNobodyToAsk) {
		t.Fatalf("a dead watcher counted: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("the dead watcher's file was kept")
	}
}

func TestExpires(t *testing.T) {
	t.Parallel()
	s := open(t)
	attend(t, s)
	_, err := s.Ask(context.Background(), Question{Text: "x", Expires: time.Now().Add(50 * time.Millisecond)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered question: %v", err)
	}
	if qs, _ := s.Pending(); len(qs) != 0 {
		t.Fatalf("an expired question is pending: %v", qs)
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, name := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := Open(state, name); err == nil {
			t.Errorf("Open(%q) succeeded", name)
		}
	}
	if err := os.MkdirAll(filepath.Join(state, "decisions", "open"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(state, "open"); err == nil {
		t.Error("a directory others can read was taken")
	}
}

func TestParticipants(t *testing.T) {
	t.Parallel()
	s := open(t)
	leave, err := s.Join("agent 3f9a2c", "assist")
	if err != nil {
		t.Fatal(err)
	}
	leave2, err := s.Join("teacher kowalska", "observe")
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Participants()
	if len(ps) != 2 || ps[0].Who != "agent 3f9a2c" || ps[1].Level != "observe" {
		t.Fatalf("participants %+v", ps)
	}
	leave()
	if ps := s.Participants(); len(ps) != 1 || ps[0].Who != "teacher kowalska" {
		t.Fatalf("after one left: %+v", ps)
	}
	leave2()
	// One whose process has ended is not shown (and its file goes).
	dead, _ := json.Marshal(Participant{PID: os.Getpid(), Start: 1, Who: "ghost"})
	path := filepath.Join(s.Dir(), "p-"+strconv.Itoa(os.Getpid())+"-dead.json")
	os.WriteFile(path, dead, 0o600)
	if ps := s.Participants(); len(ps) != 0 {
		t.Fatalf("a dead participant is shown: %+v", ps)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("its file was kept")
	}
}
