package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/procstat"
	"github.com/stem-edu/stem/internal/probe"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

// status says when the student last did something in a real tmux and
// which agents run in each instance (only running ones, only that
// instance's).
func TestStatusActivityAndAgents(t *testing.T) {
	// tmux keeps activity in whole seconds.
	before := time.Now().Truncate(time.Second)
	srv := tmuxtest.Start(t, tmuxtest.Options{})
	f := newFixture(t, levels.Observe.String(), "live-t1", "quiet-t2")
	reg, err := registry.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	quiet := filepath.Join(f.runtime, "quiet-t2")
	if err := os.MkdirAll(quiet, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"live-t1": srv.Dir, "quiet-t2": quiet} {
		if err := reg.Put(ctx, registry.Record{Instance: name, Profile: "native-amd64", ContainerID: strings.Repeat("a", 64), SocketDir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	listen(t, filepath.Join(srv.Dir, "n.sock"))
	listen(t, filepath.Join(quiet, "t.sock"))
	listen(t, filepath.Join(quiet, "n.sock"))

	store := agentstore.NewStore(sockets.Layout{Runtime: f.runtime}, f.state)
	start, err := procstat.Start(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range []agentstore.Record{
		{Provider: "claude", Instance: "live-t1", Level: "assist", PID: os.Getpid(), PIDStart: start},
		{Provider: "codex", Instance: "quiet-t2", Level: "observe", PID: os.Getpid(), PIDStart: start},
		{Provider: "gemini", Instance: "live-t1", Level: "observe", PID: os.Getpid(), PIDStart: start + 1}, // gone
	} {
		id, _, err := store.Create()
		if err != nil {
			t.Fatal(err)
		}
		rec.ID, rec.Started = id, time.Now().Add(time.Duration(i)*time.Second)
		if err := store.Write(rec); err != nil {
			t.Fatal(err)
		}
	}

	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"--grant", f.grant.ID, "--config-dir", f.config}, Options{
		Getenv: f.env("status"), In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Serve: (&recorder{}).serve,
		Tmux: probe.Tmux, Activity: probe.TmuxActivity,
	})
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut.String())
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, out.String())
	}
	got := map[string]InstanceStatus{}
	for _, is := range st.Instances {
		got[is.Instance] = is
	}
	live, q := got["live-t1"], got["quiet-t2"]
	if live.Activity == nil || live.Activity.Before(before) || live.Activity.After(time.Now()) {
		t.Errorf("activity of a session just started: %v", live.Activity)
	}
	if q.Tmux || q.Activity != nil {
		t.Errorf("a tmux that does not answer has no activity: %+v", q)
	}
	if len(live.Agents) != 1 || live.Agents[0].Provider != "claude" || live.Agents[0].Level != "assist" {
		t.Errorf("agents of live-t1: %+v", live.Agents)
	}
	if len(q.Agents) != 1 || q.Agents[0].Provider != "codex" {
		t.Errorf("agents of quiet-t2: %+v", q.Agents)
	}
}
