package tmux

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/lib/filelock"
)

// attachGrace bounds how long Close waits for a client that has not
// attached yet before ending it anyway.
const attachGrace = 5 * time.Second

// lockAttach takes the exclusive lock SOCKET.lock beside the socket (in a
// private directory). If it cannot be created there, attaching goes on
// unserialized rather than failing; a context that ends while waiting is an
// error. The socket's directory is an instance's <cid12>, which its
// container can swap for a symlink: the lock file is opened below the
// directory above it with nothing followed (internal/lib/beneath), as unixpin
// opens the socket, so it is never created in a host directory.
func lockAttach(ctx context.Context, socket string) (func(), error) {
	dir := filepath.Dir(socket)
	f, err := beneath.OpenOrCreate(filepath.Dir(dir), filepath.Base(dir)+"/"+filepath.Base(socket)+".lock", 0o600)
	var unlock func()
	if err == nil {
		unlock, err = filelock.LockFile(ctx, f, socket+".lock", filelock.Exclusive)
	}
	if err == nil {
		return unlock, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("tmux: waiting for other clients to attach to %s: %w", socket, ctx.Err())
	}
	return func() {}, nil
}
