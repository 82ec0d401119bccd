package tmux

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Every mark of the shell integration ends with the key of the shell that
// wrote it, and each shell appends its key to its pane's @stem_keys option
// when it starts (see PromptIntegration). The key lives in an unexported
// shell variable, so a program's output (a file being printed, a test log)
// cannot know it: a mark with a key the pane does not list is text, not a
// mark.

var markKeyRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

const (
	// maxMarkKeys bounds the keys kept for a pane (one per interactive
	// shell started in it; the newest win).
	maxMarkKeys = 256
	// keyRefreshEvery bounds how often a mark with an unknown key makes
	// Marks re-read the pane's keys, so a flood of forged marks costs at
	// most four tmux queries a second.
	keyRefreshEvery = 250 * time.Millisecond
)

// markKeys is the set of keys a pane lists in @stem_keys.
type markKeys map[string]bool

func parseMarkKeys(s string) markKeys {
	f := strings.Fields(s)
	if len(f) > maxMarkKeys {
		f = f[len(f)-maxMarkKeys:]
	}
	k := markKeys{}
	for _, x := range f {
		if markKeyRE.MatchString(x) {
			k[x] = true
		}
	}
	return k
}

// splitMark parses an OSC payload "133;BODY;KEY" into BODY and KEY.
func splitMark(payload string) (body, key string, ok bool) {
	rest, ok := strings.CutPrefix(payload, "133;")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ';')
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// Marks follows one pane's output stream (Notification.Data of "output"
// notifications, in order) and reports commands that finished there, from
// the shell integration's OSC 133 marks: a C (a command line was accepted)
// followed by a D;STATUS. A D without a C before it (an empty command line,
// the first prompt) is not a command. Only marks whose key known accepts
// count.
type Marks struct {
	sc      oscScanner
	running bool
	known   func(key string) bool
	line    cmdLine
	cmd     string // the line of the running command, "" if unknown
	wait    *waitMark
}

// waitMark is a stem-wait mark, written just before a D mark by a runner
// that waited for the program itself (the debug layout's program pane,
// instance.ProgramPaneArgv):
//
//	ESC ] 133 ; stem-wait ; STATUS ; SIGNAL ; KEY BEL
//
// STATUS is the shell's form (128+n for signal n), SIGNAL the signal that
// killed the program or 0 if it exited with STATUS: a D mark alone cannot
// tell a program killed by SIGSEGV from one that called exit(139).
type waitMark struct{ status, signal int }

func parseWaitMark(body string) (*waitMark, bool) {
	rest, ok := strings.CutPrefix(body, "stem-wait;")
	if !ok {
		return nil, false
	}
	st, sig, ok := strings.Cut(rest, ";")
	if !ok {
		return nil, false
	}
	s, err1 := strconv.Atoi(st)
	n, err2 := strconv.Atoi(sig)
	if err1 != nil || err2 != nil || s < 0 || s > 255 || n < 0 || n > 64 || (n > 0 && s != 128+n) {
		return nil, false
	}
	return &waitMark{status: s, signal: n}, true
}

// Command is a command that finished in a pane.
type Command struct {
	Status int
	// Line is the command line the shell accepted, trimmed, as its echo
	// showed it after the prompt; "" when that could not be read for
	// certain (see cmdLine). It is the student's text: untrusted.
	Line string
	// Waited is set when the program's real wait status was reported (a
	// stem-wait mark): then Signal is the signal that killed it, 0 if it
	// exited. Otherwise only Status is known (128+n may be signal n).
	Waited bool
	Signal int
}

// NewMarks returns Marks for pane that count only marks with a key the pane
// lists in @stem_keys. The list is read when a mark carries a key not seen
// before (at most every keyRefreshEvery), so Feed may ask tmux: call it
// from a goroutine of its own, never from the Client's reader.
func (c *Client) NewMarks(pane PaneID) *Marks {
	kc := &keyCache{c: c, pane: pane}
	return &Marks{known: func(key string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return kc.known(ctx, key)
	}}
}

// keyCache is a pane's @stem_keys, re-read on demand. Marks and Run both
// use it; it is not safe for concurrent use.
type keyCache struct {
	c      *Client
	pane   PaneID
	keys   markKeys
	loaded time.Time
}

// known reports whether the pane lists key, re-reading the list when key
// is new (at most every keyRefreshEvery, so a flood of made-up keys costs
// little).
func (k *keyCache) known(ctx context.Context, key string) bool {
	if k.keys[key] {
		return true
	}
	if !markKeyRE.MatchString(key) || time.Since(k.loaded) < keyRefreshEvery {
		return false
	}
	k.loaded = time.Now()
	s, err := k.c.DisplayFormat(ctx, k.pane, "@stem_keys")
	if err != nil {
		return false
	}
	k.keys = parseMarkKeys(s)
	return k.keys[key]
}

// Feed scans p and returns the exit statuses of commands that finished in
// it, in order.
func (m *Marks) Feed(p []byte) []int {
	var out []int
	for _, c := range m.FeedCommands(p) {
		out = append(out, c.Status)
	}
	return out
}

// FeedCommands scans p and returns the commands that finished in it, in
// order. p must be one whole %output payload (Notification.Data): where
// the prompt ends is read from the boundaries between them.
func (m *Marks) FeedCommands(p []byte) []Command {
	var out []Command
	for _, b := range p {
		m.line.byte(b)
		osc, ok := m.sc.step(b)
		if !ok {
			continue
		}
		body, key, ok := splitMark(osc)
		if !ok || m.known == nil || !m.known(key) {
			continue
		}
		switch {
		case body == "A":
			m.line.reset()
		case body == "A;k=s":
			m.line.fail() // a continuation line: the command spans lines
		case body == "C":
			m.running = true
			m.cmd, _ = m.line.accepted()
		case strings.HasPrefix(body, "D;"):
			if m.running {
				if n, err := strconv.Atoi(body[len("D;"):]); err == nil {
					c := Command{Status: n, Line: m.cmd}
					if m.wait != nil && m.wait.status == n {
						c.Waited, c.Signal = true, m.wait.signal
					}
					out = append(out, c)
				}
			}
			m.running, m.cmd, m.wait = false, "", nil
		default:
			if w, ok := parseWaitMark(body); ok {
				m.wait = w
			}
		}
	}
	m.line.endChunk()
	return out
}

// Running reports whether a command line was accepted and has not finished.
func (m *Marks) Running() bool { return m.running }
