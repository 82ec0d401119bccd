package runspec

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Messages on the readiness pipe (fd 3 of the supervisor), one per line:
// ReadyListening once its socket listens, ReadyStarted and the CLI's pid
// once the CLI runs, ReadyError and the reason when it gives up.
const (
	ReadyListening = "listening"
	ReadyStarted   = "started"
	ReadyError     = "error"
)

// Line is one readiness line, or the error that ended the pipe.
type Line struct {
	Line string
	Err  error
}

// ReadLines reads r's lines until it ends, then sends io.EOF and closes
// the channel.
func ReadLines(r io.Reader) <-chan Line {
	ch := make(chan Line, 4)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- Line{Line: sc.Text()}
		}
		ch <- Line{Err: io.EOF}
	}()
	return ch
}

// Expect waits up to d for a line that starts with want and returns it.
// An error line, the pipe's end, the timeout and ctx end the wait with an
// error that names the supervisor's log.
func Expect(ctx context.Context, lines <-chan Line, want string, d time.Duration, log string) (string, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok || l.Err != nil {
				return "", fmt.Errorf("the agent supervisor ended early (its log: %s)", log)
			}
			if msg, isErr := strings.CutPrefix(l.Line, ReadyError+" "); isErr {
				return "", fmt.Errorf("agent: %s (log: %s)", msg, log)
			}
			if strings.HasPrefix(l.Line, want) {
				return l.Line, nil
			}
		case <-timer.C:
			return "", fmt.Errorf("the agent supervisor did not report %q within %s (log: %s)", strings.TrimSpace(want), d, log)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
