package soak_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/testenv"
)

// agentSoak is the soak's agent: the test provider in its sandbox calling
// tools through the relay, its counts in soak.json in its home.
type agentSoak struct {
	a   *testenv.Account
	rec agentstore.Record
}

type soakCounts struct {
	Calls     int64  `json:"calls"`
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error"`
	Paused    bool   `json:"paused"`
}

func (g *agentSoak) read() (soakCounts, error) {
	var c soakCounts
	data, err := os.ReadFile(filepath.Join(g.a.Runtime, "stem", "agents", g.rec.ID, "home", "soak.json"))
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(data, &c)
}

func (g *agentSoak) counts(tb testing.TB) soakCounts {
	tb.Helper()
	c, err := g.read()
	if err != nil {
		tb.Fatalf("agent %s: %v", g.rec.ID, err)
	}
	return c
}

// wait polls the counts until ok, for at most d.
func (g *agentSoak) wait(tb testing.TB, d time.Duration, what string, ok func(soakCounts) bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := g.read()
		if err == nil && ok(c) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("agent %s: %s not within %s (%+v, %v)", g.rec.ID, what, d, c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *agentSoak) waitCalls(tb testing.TB, n int64) {
	g.wait(tb, time.Minute, "its first calls", func(c soakCounts) bool { return c.Calls >= n })
}

// pause holds (or resumes) the agent's calls, typed in its window as a
// user would; holding returns once no call of its is in flight.
func (g *agentSoak) pause(tb testing.TB, on bool) {
	tb.Helper()
	line := "soak resume"
	if on {
		line = "soak pause"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st struct {
		Record struct {
			SocketDir string `json:"socket_dir"`
		} `json:"record"`
	}
	r, err := g.a.Run(nil, "status", inst, "--json")
	if err != nil || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		tb.Fatalf("stemctl status: %v %s", err, r.Stderr)
	}
	sock := filepath.Join(st.Record.SocketDir, "t.sock")
	if out, err := g.a.Command(ctx, "tmux", "-S", sock, "send-keys", "-t", g.rec.Pane, line, "Enter").CombinedOutput(); err != nil {
		tb.Fatalf("tmux send-keys: %v %s", err, out)
	}
	g.wait(tb, time.Minute, line, func(c soakCounts) bool { return c.Paused == on })
}
