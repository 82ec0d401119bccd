package cardgit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/beneath"
)

// Problem is one thing about a card's git that makes git on the host
// unsafe there.
type Problem struct {
	Path string `json:"path"`
	What string `json:"what"`
	// Nested: a repository inside the card (else the card's own .git).
	Nested bool `json:"nested,omitempty"`
}

// Error is a card whose git is not safe to use on the host. Its message
// names every path and says what to do.
type Error struct {
	Card     string
	Problems []Problem
	// Instance, when set, is named in what to do about a replaced .git.
	Instance string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "git in card %s is not safe to run on the host: ", Show(e.Card))
	var nested, own bool
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is %s", Show(p.Path), p.What)
		nested = nested || p.Nested
		own = own || !p.Nested
	}
	b.WriteString(". Do not run git there: it would run that repository's hooks and configuration as you, outside the container.")
	if nested {
		b.WriteString(" A repository inside the card may have been made by code in the container: unless you made it yourself on the host, remove it (rm -rf PATH, without running git in it; if rm is refused, the container made it as its own user: remove it from inside with stemctl exec INSTANCE -- rm -rf PATH); move one you made out of the card.")
	}
	if own {
		inst := "each instance of this card"
		if e.Instance != "" {
			inst = e.Instance
		}
		fmt.Fprintf(&b, " The card's .git is not the one the container was given read-only: look at it without git (ls -la %s, its hooks/ and config); if you replaced it yourself, remove %s (stemctl rm) and bring it up again, which records the new one.", Show(Path(e.Card)), inst)
	}
	return b.String()
}

// Check reports whether git on the host is safe in card: its .git is each
// of want (the identities its instances were created with; none for an
// instance made by an older stem, which recorded none) and no other
// repository is inside it (Nested). It returns nil, an *Error naming each
// problem, or an error when the card cannot be read.
func Check(ctx context.Context, card string, want ...Identity) error {
	var probs []Problem
	if len(want) == 0 {
		if p := ownProblem(card, nil); p != nil {
			probs = append(probs, *p)
		}
	}
	for i := range want {
		if p := ownProblem(card, &want[i]); p != nil {
			probs = append(probs, *p)
			break // one line about the card's own .git is enough
		}
	}
	found, err := Nested(ctx, card)
	for _, f := range found {
		probs = append(probs, Problem{Path: f.Path, What: f.What + " (a nested repository)", Nested: true})
	}
	if len(probs) > 0 {
		return &Error{Card: card, Problems: probs}
	}
	return err
}

// ownProblem compares card's .git with want.
func ownProblem(card string, want *Identity) *Problem {
	path := Path(card)
	got, err := Inspect(card)
	if err != nil {
		fi, lerr := beneath.Lstat(card, ".git")
		switch {
		case errors.Is(lerr, os.ErrNotExist):
			if want == nil {
				return nil
			}
			return &Problem{Path: path, What: "gone (the instance was created with " + want.String() + ")"}
		case lerr == nil:
			return &Problem{Path: path, What: beneath.Kind(fi.Mode()) + " now"}
		}
		return &Problem{Path: path, What: "unreadable (" + err.Error() + ")"}
	}
	if want == nil || got.Same(*want) {
		return nil
	}
	if got.Kind != want.Kind {
		return &Problem{Path: path, What: fmt.Sprintf("a %s now, not the %s the instance was created with", kindWord(got.Kind), kindWord(want.Kind))}
	}
	return &Problem{Path: path, What: fmt.Sprintf("another %s than the instance was created with (%s; now inode %d on %d:%d)", kindWord(got.Kind), want, got.Ino, unix.Major(got.Dev), unix.Minor(got.Dev))}
}

func kindWord(k string) string {
	if k == KindFile {
		return "gitdir: file"
	}
	return "directory"
}

// Problems returns err's problems when it is an *Error.
func Problems(err error) []Problem {
	var e *Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return nil
}

// CheckRunning is Check for an instance: want is the identity its record
// holds (nil for an older stem's record) and pid, when above zero, the
// first process of its running container, whose .git must be want too
// (Mounted).
func CheckRunning(ctx context.Context, card string, want *Identity, pid int) error {
	var err error
	if want == nil {
		err = Check(ctx, card)
	} else {
		err = Check(ctx, card, *want)
	}
	if want == nil || pid <= 0 {
		return err
	}
	if merr := Mounted(pid, card, *want); merr != nil {
		p := Problem{Path: Path(card), What: "not what the running container has at that path (" + merr.Error() + ")"}
		var ce *Error
		if errors.As(err, &ce) {
			ce.Problems = append([]Problem{p}, ce.Problems...)
			return ce
		}
		return &Error{Card: card, Problems: []Problem{p}}
	}
	return err
}

// Show quotes a path for a message when it holds anything but printable
// UTF-8: names in the card are the container's choice, and a terminal
// must not get their control sequences.
func Show(p string) string {
	if utf8.ValidString(p) && strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return p
	}
	return strconv.Quote(p)
}
