package class

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultSilent is how long a student's open session may go without a
// byte from their side before the hub counts them gone. A machine whose
// packets are dropped (a laptop closed, a cable pulled) closes nothing:
// without this only the next call's deadline (up to the poll's wait plus
// the timeout, 35 s) or TCP's own timers would notice.
const DefaultSilent = 5 * time.Second

// errSilent marks a session the hub ended because the student's side
// stopped answering.
var errSilent = errors.New("the student's machine stopped answering")

// watch ends the session once the student's side has been quiet for
// silent. A quiet session is pinged every silent/5, so a live side always
// has something to say well within the window: the ping goes to the
// gate's server, which answers it at once however busy its tools are,
// and only one is out at a time. Pings have their own slot and deadline
// (silent), outside the calls' budget.
func (s *mcpSession) watch(ctx context.Context, silent time.Duration) {
	every := silent / 5
	tick := time.NewTicker(max(every/2, 10*time.Millisecond))
	defer tick.Stop()
	pinging := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wire.done:
			return
		case <-tick.C:
		}
		q := s.wire.quiet()
		if q >= silent {
			s.wire.end(fmt.Errorf("%w: nothing from it for %v, not even an answer to a ping (asleep, off the network, or hung?)", errSilent, silent))
			return
		}
		if q < every {
			continue
		}
		select {
		case pinging <- struct{}{}:
			go func() {
				defer func() { <-pinging }()
				pctx, cancel := context.WithTimeout(ctx, silent)
				defer cancel()
				s.wire.ping(pctx)
			}()
		default: // one is out already
		}
	}
}
