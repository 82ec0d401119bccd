package tmux_test

import (
	"context"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

func TestListClients(t *testing.T) {
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := srv.Dial(t)
	b := srv.Dial(t)
	cl, err := a.ListClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	selfs, control := 0, 0
	for _, c := range cl {
		if c.Self {
			selfs++
		}
		if c.ControlMode {
			control++
		}
	}
	if len(cl) != 2 || selfs != 1 || control != 2 {
		t.Fatalf("clients %+v: want two control clients, one of them self", cl)
	}
	b.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		cl, _ = a.ListClients(ctx)
		if len(cl) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(cl) != 1 || !cl[0].Self {
		t.Fatalf("after closing one: %+v", cl)
	}
}
