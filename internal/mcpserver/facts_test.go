package mcpserver_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/lib/filestamp"
	"github.com/stem-edu/stem/internal/workspace"
)

// The server keeps the card's policy between calls, keyed on what the
// container cannot forge. stem.toml rewritten in place, from inside the
// container say, with a tighter policy of the same size and its mtime set
// back (touch -d) keeps its inode, size and mtime: a cache keyed on those
// (the control checks they are all unchanged) would go on serving under
// the looser policy. The very next call is refused.
func TestPolicyCacheSeesARewriteWithTheSameStamp(t *testing.T) {
	in := fixture(t)
	path := filepath.Join(in.Resolved.CardPath, workspace.ManifestName)
	loose, tight := `max_level = "observe"`, `max_level = "none"   `
	if len(loose) != len(tight) {
		t.Fatal("the two policies must be the same size")
	}
	in.SetAgentPolicy(t, loose)
	// Once the file is older than the kernel's file clock can blur, the
	// server keeps what it read.
	waitUntil(t, 10*time.Second, "stem.toml settled", func() bool {
		st, ok := filestamp.Lstat(path)
		return ok && st.Settled(time.Now())
	})
	s := connect(t, in, "observe")
	pane := strings.TrimSpace(in.Tmux(t, "display-message", "-p", "-t", "stem:shell", "#{pane_id}"))
	for range 3 {
		s.ok("pane_capture", map[string]any{"pane": pane})
	}

	before := naiveStamp(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tightened := bytes.Replace(data, []byte(loose), []byte(tight), 1)
	if bytes.Equal(tightened, data) {
		t.Fatal("the policy line is not in stem.toml")
	}
	if err := os.WriteFile(path, tightened, 0o644); err != nil { // in place: O_TRUNC
		t.Fatal(err)
	}
	mtime := time.Unix(0, before.mtime)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if after := naiveStamp(t, path); after != before {
		t.Fatalf("control: the rewrite changed inode, size or mtime (%+v, was %+v): it would not fool a naive key", after, before)
	}

	s.refused("pane_capture", map[string]any{"pane": pane})
	if got := s.tools(); len(got) != 1 || got[0] != "task_info" {
		t.Fatalf("after the rewrite: tools %v, want only task_info", got)
	}
}

// naive is the key a cache of stem.toml once had: inode, size and mtime.
type naive struct{ ino, size, mtime int64 }

func naiveStamp(t *testing.T, path string) naive {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return naive{int64(st.Ino), st.Size, st.Mtim.Nano()}
}
