package tmux

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Activity is when the attached session last showed someone at work: the
// latest output in any of its windows (tmux's window_activity) and the
// latest key from a terminal attached to it (client_activity). Control-mode
// clients do not count (stem's own connections, an agent's, a teacher's),
// nor does session_activity, which attaching alone updates. The zero time
// means tmux reported neither.
//
// The server is the container's: a time it reports is only a claim, so one
// in the future counts as now.
func (c *Client) Activity(ctx context.Context) (time.Time, error) {
	wins, err := c.framed(ctx, func(f string) string { return "list-windows -a -F " + f },
		[]string{"session_id", "window_activity"})
	if err != nil {
		return time.Time{}, fmt.Errorf("tmux: list-windows: %w", err)
	}
	clients, err := c.framed(ctx, func(f string) string { return "list-clients -F " + f },
		[]string{"session_id", "client_control_mode", "client_activity"})
	if err != nil {
		return time.Time{}, fmt.Errorf("tmux: list-clients: %w", err)
	}
	var latest int64
	see := func(session, stamp string) {
		if c.session != "" && session != c.session {
			return
		}
		if v, err := strconv.ParseInt(stamp, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	for _, w := range wins {
		see(w[0], w[1])
	}
	for _, cl := range clients {
		if cl[1] != "1" {
			see(cl[0], cl[2])
		}
	}
	if latest <= 0 {
		return time.Time{}, nil
	}
	t := time.Unix(latest, 0)
	if now := time.Now(); t.After(now) {
		t = now
	}
	return t, nil
}
