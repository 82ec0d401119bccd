package tmux_test

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// TestAttachBurstKeepsServerAlive: tmux 3.3a segfaults when control
// clients go away before they are identified; 40 clients that dial and
// close at once, three times, and clients whose dial is cancelled midway,
// must leave the server running.
func TestAttachBurstKeepsServerAlive(t *testing.T) {
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	sock := srv.Socket
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		// Dials that are not cancelled must succeed: a burst that dials
		// nothing would prove nothing about the server.
		failed := make(chan error, 40)
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				timeout := 20 * time.Second
				if i%4 == 0 {
					timeout = time.Duration(i) * time.Millisecond // cancelled during the attach
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				c, err := tmux.Dial(ctx, tmux.Options{Socket: sock, Session: "stem"})
				if err == nil {
					c.Close()
				} else if i%4 != 0 {
					failed <- err
				}
			}(i)
		}
		wg.Wait()
		close(failed)
		for err := range failed {
			t.Errorf("round %d: a dial with time to spare failed: %v", round, err)
		}
		if out, err := exec.Command("tmux", "-S", sock, "list-sessions").CombinedOutput(); err != nil {
			t.Fatalf("round %d: the tmux server died: %v %s", round, err, out)
		}
	}
}
