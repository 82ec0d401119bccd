package unixpin

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// Gone reports whether nothing can listen on the socket at path any more:
// the path is gone (its directory was removed), refuses connections (the
// server died with its container) or is no longer a socket (something in
// the container put a symlink or a file there). The socket is opened as
// Dial opens it, never by path: a symlink planted over it must not make
// the host connect to whatever it names. Any other outcome, a server that
// answers included, counts as present. It waits at most a second.
func Gone(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotSocket)
}
