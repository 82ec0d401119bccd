package tmux

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A Question is a yes/no prompt in the status line of one of the
// student's terminals (a tmux client that is not in control mode), for
// approvals. The student answers with one key: 'y' is yes, 'a' is yes
// for a while (the caller decides how long), any other key is no.
//
// Only a keyboard can answer. The prompt takes keys from the client's
// terminal; send-keys (what stem's pane tools use) types into panes, never
// into a client's prompt, and tmux 3.3 has no command that does (3.4's
// send-keys -K would). The answer comes back in a server option whose name
// holds one random nonce and whose yes values are others: a yes value
// exists only in the prompt's template until the student presses its key, so a
// program in the container that watches and rewrites options cannot turn
// a "no" or a pending question into a yes.
type Question struct {
	c      *Client
	Client string // the tmux client asked
	option string
	yes    string
	while  string
}

// Answer is the student's key: 'y' Yes, 'a' YesForAWhile, anything else No.
type Answer int

const (
	No Answer = iota
	Yes
	YesForAWhile
)

// ErrNoStudentClient: no terminal of the student's is attached to ask.
var ErrNoStudentClient = errors.New("no terminal of the student's is attached to tmux to ask")

// Ask shows prompt (one line, shown as text) to the student's most
// recently active terminal attached to this session.
func (c *Client) Ask(ctx context.Context, prompt string) (*Question, error) {
	recs, err := c.framed(ctx, func(f string) string { return "list-clients -F " + f },
		[]string{"client_name", "client_control_mode", "session_id", "client_activity"})
	if err != nil {
		return nil, fmt.Errorf("tmux: list-clients: %w", err)
	}
	best, bestAct := "", int64(-1)
	for _, r := range recs {
		act, _ := strconv.ParseInt(r[3], 10, 64)
		if r[1] == "1" || (c.session != "" && r[2] != c.session) {
			continue
		}
		if act > bestAct {
			best, bestAct = r[0], act
		}
	}
	if best == "" {
		return nil, ErrNoStudentClient
	}
	q := &Question{c: c, Client: best, option: "@stem_ans_" + strings.TrimPrefix(newNonce(), "stem-"), yes: newNonce(), while: newNonce()}
	// %1 is the key pressed (tmux replaces only the first %%, every %1).
	// A key that breaks the command sets nothing: no answer, a no. The
	// option is set once, to the value of the key's case. -b: the control
	// client must not wait for the answer.
	tmpl := fmt.Sprintf(`if -F "#{==:%%1,y}" "set -gq %[1]s %[2]s" ; if -F "#{==:%%1,a}" "set -gq %[1]s %[3]s" ; if -F "#{&&:#{!=:%%1,y},#{!=:%%1,a}}" "set -gq %[1]s no"`,
		q.option, q.yes, q.while)
	p, err := QuoteFormat(prompt)
	if err != nil {
		return nil, err
	}
	cl, err := Quote(best)
	if err != nil {
		return nil, err
	}
	if _, err := c.command(ctx, "command-prompt -b -1 -t "+cl+" -p "+p+" "+mustQuote(tmpl)); err != nil {
		return nil, fmt.Errorf("tmux: ask the student: %w", err)
	}
	return q, nil
}

// Wait polls for the answer every interval until ctx ends; ctx's error if
// unanswered. The option is removed either way, so an answer counts once.
func (q *Question) Wait(ctx context.Context, interval time.Duration) (Answer, error) {
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		q.c.command(cctx, "set -gqu "+q.option)
		cancel()
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		v, err := q.c.command(ctx, "show -gqv "+q.option)
		if err != nil {
			// A command cut short by ctx's deadline is the question
			// running out of time, whichever noticed first.
			if dl, ok := ctx.Deadline(); ctx.Err() != nil || ok && !time.Now().Before(dl) {
				return No, context.DeadlineExceeded
			}
			return No, fmt.Errorf("tmux: read the answer: %w", err)
		}
		switch v = strings.TrimSpace(v); v {
		case "":
		case q.yes:
			return Yes, nil
		case q.while:
			return YesForAWhile, nil
		default:
			return No, nil
		}
		select {
		case <-ctx.Done():
			return No, ctx.Err()
		case <-t.C:
		}
	}
}
