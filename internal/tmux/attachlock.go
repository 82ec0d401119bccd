package tmux

import (
	"context"
	"fmt"
	"time"

	"github.com/stem-edu/stem/internal/filelock"
)

// attachGrace bounds how long Close waits for a client that has not
// attached yet before ending it anyway.
const attachGrace = 5 * time.Second

// lockAttach takes the exclusive lock SOCKET.lock beside the socket (in a
// private directory). If it cannot be created there, attaching goes on
// unserialized rather than failing; a context that ends while waiting is an
// error.
func lockAttach(ctx context.Context, socket string) (func(), error) {
	unlock, err := filelock.Lock(ctx, socket+".lock", filelock.Exclusive)
	if err == nil {
		return unlock, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("tmux: waiting for other clients to attach to %s: %w", socket, ctx.Err())
	}
	return func() {}, nil
}
