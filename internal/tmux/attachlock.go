package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// attachGrace bounds how long Close waits for a client that has not
// attached yet before ending it anyway.
const attachGrace = 5 * time.Second

// lockAttach takes an exclusive flock on SOCKET.lock, polling until ctx
// ends. The lock file sits beside the socket (in a private directory); if
// it cannot be created there, attaching goes on unserialized rather than
// failing.
func lockAttach(ctx context.Context, socket string) (func(), error) {
	f, err := os.OpenFile(socket+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return func() {}, nil
	}
	delay := 500 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("tmux: waiting for other clients to attach to %s: %w", socket, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}
