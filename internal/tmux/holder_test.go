package tmux_test

import (
	"testing"

	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// TestHolderLeavesOurPipesOnThePoller: the holder gets pipe ends of its
// own. Handed ours, exec puts them in blocking mode, and each read of the
// control stream then costs a blocking system call.
func TestHolderLeavesOurPipesOnThePoller(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	nb, err := c.StdinNonblockForTest()
	if err != nil {
		t.Fatal(err)
	}
	if !nb {
		t.Fatal("the control client's stdin is in blocking mode: off Go's poller")
	}
}
