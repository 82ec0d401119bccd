package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noPanic fails the test if a stemctl run crashed instead of explaining.
func noPanic(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.Stderr, "panic:") || strings.Contains(r.Stderr, "goroutine ") {
		t.Fatalf("stemctl panicked:\n%s", r.Stderr)
	}
}

// A registry cut short (a full disk, another program's crash) stops every
// command that needs it with the file, the line and the repair; after the
// repair the account works again.
func TestDamagedRegistryExplainsAndRepairs(t *testing.T) {
	a := newAccount(t)
	reg := filepath.Join(a.Base, "state", "registry.json")
	const cut = "{\n  \"schema\": 1,\n  \"instances\": {\n    \"native-amd64-demo-hello-t1\": {\n      \"instance\": \"nat"
	if err := os.WriteFile(reg, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"status", "native-amd64-demo-hello-t1"}, {"up", "native-amd64", "demo", "hello", "1"}} {
		r := a.must(1, args...)
		noPanic(t, r)
		for _, want := range []string{"the registry " + reg + " is not valid JSON (line 5", "mv " + reg + " " + reg + ".damaged", "stemctl up"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("stemctl %v: stderr lacks %q:\n%s", args, want, r.Stderr)
			}
		}
	}
	if got, _ := os.ReadFile(reg); string(got) != cut {
		t.Fatalf("a failed command rewrote the damaged registry: %q", got)
	}
	if err := os.Rename(reg, reg+".damaged"); err != nil {
		t.Fatal(err)
	}
	a.must(0, "list")
}

// A damaged grants file refuses every teacher (fail-closed) and says so
// with the file and line.
func TestDamagedGrantsExplain(t *testing.T) {
	a := newAccount(t)
	grants := filepath.Join(a.Base, "config", "access", "grants.json")
	os.MkdirAll(filepath.Dir(grants), 0o700)
	const cut = "{\n  \"schema\": 1,\n  \"grants\": {\n    \"k1\": {\"name\": \"t1\", \"lev"
	if err := os.WriteFile(grants, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	r := a.must(1, "access", "list")
	noPanic(t, r)
	for _, want := range []string{"the grants file " + grants + " is not valid JSON (line 4", "every teacher is refused", "stemctl access grant"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
}

// One agent's damaged record is reported with its repair and kept (its
// supervisor may still run); the other agents are listed as before.
func TestDamagedAgentRecordIsReportedAndKept(t *testing.T) {
	a := newAccount(t)
	root := filepath.Join(a.Runtime, "stem", "agents")
	live := exec.Command("sleep", "600")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	good, _ := json.Marshal(map[string]any{
		"id": "aaaaaa", "provider": "codex", "instance": "native-amd64-demo-hello-t1", "level": "observe",
		"mode": "here", "started": time.Now().UTC(), "pid": live.Process.Pid,
	})
	bad := filepath.Join(root, "bbbbbb")
	for id, data := range map[string][]byte{"aaaaaa": good, "bbbbbb": []byte("{\n  \"id\": \"bbbbbb\",\n  \"provi")} {
		os.MkdirAll(filepath.Join(root, id), 0o700)
		if err := os.WriteFile(filepath.Join(root, id, "agent.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Old enough that a listing prunes a directory it cannot read.
	old := time.Now().Add(-10 * time.Minute)
	os.Chtimes(bad, old, old)

	r := a.must(0, "agent", "list")
	noPanic(t, r)
	if !strings.Contains(r.Stdout, "aaaaaa") {
		t.Errorf("the good agent is not listed:\n%s", r.Stdout)
	}
	for _, want := range []string{"bbbbbb", filepath.Join(bad, "agent.json") + " is not valid JSON (line 3", "rm -r " + bad} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("agent list lacks %q:\n%s", want, r.Stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(bad, "agent.json")); err != nil {
		t.Fatalf("the damaged record was pruned: %v", err)
	}
	r = a.must(1, "agent", "stop", "bbbbbb")
	noPanic(t, r)
	if !strings.Contains(r.Stderr, "is not valid JSON") {
		t.Errorf("agent stop bbbbbb: %s", r.Stderr)
	}
}
