package tmux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/termtext"
)

// RunOptions tune Run.
type RunOptions struct {
	// MaxOutput caps the output kept, in bytes of raw terminal output; the
	// end is kept. Default 1 MiB.
	MaxOutput int
}

// RunResult is the outcome of a command run at a prompt.
type RunResult struct {
	// Output is what the command printed (sanitized with termtext, with
	// carriage returns applied as a terminal would), without the echo of
	// the command line and without the next prompt.
	Output    string        `json:"output"`
	ExitCode  int           `json:"exit_code"`
	Truncated bool          `json:"truncated"`
	Duration  time.Duration `json:"duration"`
}

// MaxRunCommand bounds the command line Run types.
const MaxRunCommand = 4096

// Run types command at the bash prompt of pane, presses Enter and returns
// its output and exit status. See RunWithOptions.
func (c *Client) Run(ctx context.Context, pane PaneID, command string) (output string, exitCode int, err error) {
	r, err := c.RunWithOptions(ctx, pane, command, RunOptions{})
	return r.Output, r.ExitCode, err
}

// RunWithOptions runs command in a pane that sits at an interactive bash
// prompt with the stem integration (PromptIntegration). It is for the full
// access level: the command runs as the student, in the student's shell.
//
// The command is typed exactly as the student would type it and lands in
// the shell history as such; nothing is appended to it. Completion is read
// from the OSC 133 marks the integration writes (C when bash accepts the
// line, D;STATUS when it finishes), which travel in %output and never show
// in the pane; only marks carrying a key the pane lists in @stem_keys count,
// so the command's own output cannot end it early. Before typing, Run checks that the pane runs one of
// Options.Shells and sends the probe key, which only bash's readline at an
// integrated prompt answers (with the number of characters already typed on
// the line). So Run fails before typing anything when a program runs in the
// pane (ErrNotAtPrompt), the shell is not an integrated bash
// (ErrNoIntegration), the student has typed a partial line (ErrPromptBusy),
// or the pane is dead, in copy mode or synchronized.
//
// command must be one line of printable text (no control characters, at
// most MaxRunCommand bytes). If bash asks for a continuation line (an
// unclosed quote), Run cancels the line with C-c and returns
// ErrIncompleteCommand (bash records the line in its history, as it would
// for the student). ctx bounds the whole run; without a deadline,
// Options.CommandTimeout applies, so give builds a longer one. If ctx ends
// first, Run returns ErrTimeout and the command keeps running; the caller
// may send C-c.
//
// Another client (the student, another agent) typing into the same pane at
// the same time can interleave with the command: there is no arbitration.
func (c *Client) RunWithOptions(ctx context.Context, pane PaneID, command string, opt RunOptions) (RunResult, error) {
	start := time.Now()
	if err := pane.check(); err != nil {
		return RunResult{}, err
	}
	if err := checkRunCommand(command); err != nil {
		return RunResult{}, err
	}
	if opt.MaxOutput <= 0 {
		opt.MaxOutput = 1 << 20
	}
	ctx, cancel := c.commandCtx(ctx)
	defer cancel()

	mu := c.paneLock(pane)
	mu.Lock()
	defer mu.Unlock()

	st, err := c.paneState(ctx, pane)
	if err != nil {
		return RunResult{}, err
	}
	if st.command == "tmux" {
		if st, err = c.settled(ctx, pane, st); err != nil {
			return RunResult{}, err
		}
	}
	if err := st.keysAllowed(pane); err != nil {
		return RunResult{}, err
	}
	if st.session != c.session {
		return RunResult{}, fmt.Errorf("%w: %s is in %s, this client watches %s", ErrNotInSession, pane, st.session, c.session)
	}
	if !slices.Contains(c.opts.Shells, st.command) {
		return RunResult{}, fmt.Errorf("%w: %s is running %q", ErrNotAtPrompt, pane, termtext.String(termtext.Clip(st.command, 64)))
	}

	tr := newRunTracker(opt.MaxOutput, st.keys)
	keys := &keyCache{c: c, pane: pane, keys: st.keys}
	remove := c.addTap(func(n *Notification) {
		switch {
		case n.Kind == "output" && n.Pane == pane:
			tr.feed(n.Data)
		case n.Kind == "window-close" || n.Kind == "unlinked-window-close" || n.Kind == "layout-change" || n.Kind == "exit":
			tr.poke()
		}
	})
	defer remove()

	// 1. Probe: is readline at an integrated prompt, with an empty line?
	if err := c.probe(ctx, keys, tr, func(s *runState) bool { return s.probed }); err != nil {
		return RunResult{}, err
	}
	s := tr.snapshot()
	if s.probeFixed && s.probeLen == 0 {
		// The probe had to put the hooks back; PS0 only takes effect at
		// the next prompt. An empty line gives one (nothing is added to
		// the history), then we probe again.
		prompts := s.prompts
		tr.resetProbe()
		if _, err := c.exec(ctx, hexKeys(pane, "\r")); err != nil {
			return RunResult{}, fmt.Errorf("tmux: typing into %s: %w", pane, err)
		}
		if err := c.probe(ctx, keys, tr, func(s *runState) bool { return s.probed && s.prompts > prompts }); err != nil {
			return RunResult{}, err
		}
		s = tr.snapshot()
	}
	if s.probeLen != 0 || s.keymap == "vi-command" {
		// bash clears the line to run the probe's binding and draws it
		// again afterwards: let it finish, so whoever looks at the pane
		// next sees the student's line, not a blank one.
		tr.settle(ctx, 15*time.Millisecond, 250*time.Millisecond)
		if s.probeLen != 0 {
			return RunResult{}, fmt.Errorf("%w: %s has %d characters typed at its prompt", ErrPromptBusy, pane, s.probeLen)
		}
		return RunResult{}, fmt.Errorf("%w: %s is in vi command mode", ErrPromptBusy, pane)
	}

	// 2. Type the command and Enter.
	tr.arm()
	if _, err := c.exec(ctx, hexKeys(pane, command+"\r")); err != nil {
		return RunResult{}, fmt.Errorf("tmux: typing into %s: %w", pane, err)
	}

	// 3. Wait for C (accepted) and D (finished), or PS2.
	acceptCtx, acceptCancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	err = c.runWait(acceptCtx, pane, tr, func(s *runState) bool { return s.started || s.finished || s.ps2 })
	acceptCancel()
	if err != nil {
		if errors.Is(err, ErrTimeout) && ctx.Err() == nil {
			return RunResult{}, fmt.Errorf("%w: %s: no command-start mark within %v after typing", ErrNoIntegration, pane, c.opts.ProbeTimeout)
		}
		return RunResult{}, err
	}
	if s := tr.snapshot(); s.ps2 && !s.started {
		// Cancel the continuation and wait for the fresh prompt, so the
		// shell is ready (not handling SIGINT) for whatever comes next.
		if _, err := c.exec(ctx, hexKeys(pane, "\x03")); err == nil {
			promptCtx, promptCancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
			c.runWait(promptCtx, pane, tr, func(n *runState) bool { return n.prompts > s.prompts })
			promptCancel()
		}
		return RunResult{}, fmt.Errorf("%w: %q", ErrIncompleteCommand, termtext.Clip(command, 64))
	}
	if err := c.runWait(ctx, pane, tr, func(s *runState) bool { return s.finished }); err != nil {
		if errors.Is(err, ErrTimeout) {
			return RunResult{}, fmt.Errorf("%w: %q still running in %s after %v", ErrTimeout, termtext.Clip(command, 64), pane, time.Since(start).Round(time.Millisecond))
		}
		return RunResult{}, err
	}
	s = tr.snapshot()
	out, _ := termtext.Sanitize(s.out, termtext.Options{Overstrike: true})
	return RunResult{Output: out, ExitCode: s.status, Truncated: s.truncated, Duration: time.Since(start)}, nil
}

func checkRunCommand(cmd string) error {
	switch {
	case strings.TrimSpace(cmd) == "":
		return fmt.Errorf("%w: empty command", ErrInvalidArgument)
	case len(cmd) > MaxRunCommand:
		return fmt.Errorf("%w: command of %d bytes (limit %d)", ErrInvalidArgument, len(cmd), MaxRunCommand)
	case !utf8.ValidString(cmd):
		return fmt.Errorf("%w: command is not valid UTF-8", ErrInvalidArgument)
	}
	for _, r := range cmd {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: command holds control character %U (one line of text only)", ErrInvalidArgument, r)
		}
	}
	return nil
}

// hexKeys is a send-keys command that types s byte by byte.
func hexKeys(pane PaneID, s string) string {
	var b strings.Builder
	b.WriteString("send-keys -t ")
	b.WriteString(string(pane))
	b.WriteString(" -H")
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, " %02x", s[i])
	}
	return b.String()
}

// probe sends the probe key and waits for cond, sending it once more if
// the first one gets no answer in a third of ProbeTimeout: bash discards
// typed-ahead input in some moments (while it handles SIGINT). A second
// answer, if both arrive, is ignored; the second key reaches readline
// before anything typed later, so it cannot land inside a command.
func (c *Client) probe(ctx context.Context, keys *keyCache, tr *runTracker, cond func(*runState) bool) error {
	pane := keys.pane
	deadline := time.Now().Add(c.opts.ProbeTimeout)
	for attempt := 0; ; attempt++ {
		if _, err := c.exec(ctx, hexKeys(pane, probeKey)); err != nil {
			return fmt.Errorf("tmux: probing %s: %w", pane, err)
		}
		wait := c.opts.ProbeTimeout / 3
		if attempt > 0 {
			wait = time.Until(deadline)
		}
		probeCtx, cancel := context.WithTimeout(ctx, wait)
		err := c.probeWait(probeCtx, keys, tr, cond)
		cancel()
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, ErrTimeout) || ctx.Err() != nil:
			return err
		case attempt > 0 && tr.snapshot().oldIntegration:
			return fmt.Errorf("%w: the shell in %s runs an older stem-prompt.sh (marks without keys); `stemctl up` re-creates the instance with the current one", ErrNoIntegration, pane)
		case attempt > 0:
			return fmt.Errorf("%w: %s did not answer the probe within %v (not bash, or stem-prompt.sh not sourced, or a program reads the terminal)", ErrNoIntegration, pane, c.opts.ProbeTimeout)
		}
	}
}

// probeWait is runWait for a probe answer. An answer with a key the pane
// did not list makes it re-read the pane's keys (keyCache, throttled): the
// shell may have started, and published its key, after Run read them.
func (c *Client) probeWait(ctx context.Context, keys *keyCache, tr *runTracker, cond func(*runState) bool) error {
	for {
		err := c.runWait(ctx, keys.pane, tr, func(s *runState) bool { return cond(s) || s.strayKey != "" })
		if err != nil {
			return err
		}
		s := tr.snapshot()
		if cond(&s) {
			return nil
		}
		keys.known(ctx, s.strayKey)
		tr.setKeys(keys.keys)
	}
}

// runWait waits until cond holds for the tracker's state, re-checking the
// pane when tmux reports a structural change (the shell may have exited).
func (c *Client) runWait(ctx context.Context, pane PaneID, tr *runTracker, cond func(*runState) bool) error {
	for {
		s := tr.snapshot()
		if cond(&s) {
			return nil
		}
		select {
		case <-tr.wake:
			if tr.takePoke() {
				st, err := c.paneState(ctx, pane)
				if err != nil {
					return err
				}
				if st.dead {
					return fmt.Errorf("%w: %s", ErrPaneDead, pane)
				}
			}
		case <-c.done:
			return c.Err()
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ErrTimeout
			}
			return ctx.Err()
		}
	}
}
