package audit_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/cmdutil"
)

// intents writes two effectful calls, one finished (intent 2, outcome 3)
// and one whose server ended during it (intent 4).
func (e *env) intents(t *testing.T) {
	t.Helper()
	e.append(t,
		audit.Entry{Event: audit.SessionStart, Account: "alice", Instance: "a", Level: "full", Result: "ok"},
		audit.Entry{Event: audit.ToolIntent, Account: "alice", Instance: "a", Level: "full", Tool: "nvim_hint", Session: "s1"},
		audit.Entry{Event: audit.ToolCall, Account: "alice", Instance: "a", Level: "full", Tool: "nvim_hint", Session: "s1", Result: "ok", Intent: 2, Duration: "2.5ms"},
		audit.Entry{Event: audit.ToolIntent, Account: "alice", Instance: "a", Level: "full", Tool: "pane_run", Session: "s1"},
	)
}

func TestVerifyReportsUnfinishedCalls(t *testing.T) {
	e := newEnv(t)
	e.intents(t)
	if err := e.run(t, "verify"); err != nil {
		t.Fatalf("an unfinished call broke the chain: %v %s", err, e.out.String())
	}
	out := e.out.String()
	if !strings.HasPrefix(out, e.log.Path()+": chain intact, 4 lines\n") || !strings.Contains(out, "1 effectful call(s) have an intent but no outcome") ||
		!strings.Contains(out, "line 4: seq 4, ") || !strings.Contains(out, "pane_run on a, session s1") || strings.Contains(out, "nvim_hint") {
		t.Fatalf("verify:\n%s", out)
	}
	if err := e.run(t, "verify", "--json"); err != nil {
		t.Fatal(err)
	}
	var res audit.VerifyResult
	if err := json.Unmarshal(e.out.Bytes(), &res); err != nil || !res.OK || res.UnfinishedCount != 1 || len(res.Unfinished) != 1 || res.Unfinished[0].Seq != 4 {
		t.Fatalf("--json: %v %s", err, e.out.String())
	}
}

// A log whose last line is broken stops stem-mcp's effectful calls and
// sessions; verify says so and how to start a new log.
func TestVerifySaysABrokenTailStopsAuditing(t *testing.T) {
	e := newEnv(t)
	e.writeChain(t, 3)
	f, err := os.OpenFile(e.log.Path(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"ev` + "\n") // a whole line, not an entry
	f.Close()
	err = e.run(t, "verify")
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 4 {
		t.Fatalf("err %v, want exit status 4", err)
	}
	out := e.out.String()
	if !strings.Contains(out, "chain broken at line 4: not valid JSON") || !strings.Contains(out, "stem-mcp refuses new sessions and effectful calls until this is fixed") ||
		!strings.Contains(out, "move audit.jsonl and audit.head aside") {
		t.Fatalf("verify:\n%s", out)
	}
}

func TestShowIntentsAndOutcomes(t *testing.T) {
	e := newEnv(t)
	e.intents(t)
	if err := e.run(t, "show"); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(e.out.String()), "\n")
	if len(rows) != 5 || !strings.HasSuffix(rows[2], "nvim_hint  started") || !strings.HasSuffix(rows[3], "nvim_hint  ok (intent 2, 2.5ms)") ||
		!strings.HasSuffix(rows[4], "pane_run   no outcome (may have acted)") || !strings.Contains(rows[2], "tool_intent") {
		t.Fatalf("table:\n%s", e.out.String())
	}
	for _, c := range []struct {
		args []string
		want []int64
	}{
		{[]string{"--unfinished"}, []int64{4}},
		{[]string{"--event", audit.ToolIntent}, []int64{2, 4}},
		{[]string{"--unfinished", "--instance", "b"}, nil},
	} {
		if err := e.run(t, append([]string{"show", "--json"}, c.args...)...); err != nil {
			t.Fatal(err)
		}
		var got []audit.Entry
		if err := json.Unmarshal(e.out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, en := range got {
			seqs = append(seqs, en.Seq)
		}
		if !slices.Equal(seqs, c.want) {
			t.Errorf("show %v = %v, want %v", c.args, seqs, c.want)
		}
	}
}

// The start of an entry a killed writer left is not a broken chain: verify
// says what it is and that the next entry cuts it off.
func TestVerifyNamesAPartialEntry(t *testing.T) {
	e := newEnv(t)
	e.writeChain(t, 3)
	f, err := os.OpenFile(e.log.Path(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"ev`)
	f.Close()
	if err := e.run(t, "verify"); err != nil {
		t.Fatalf("verify: %v\n%s", err, e.out)
	}
	out := e.out.String()
	if !strings.Contains(out, "chain intact, 3 lines") || !strings.Contains(out, "after them, 12 bytes start an entry") || strings.Contains(out, "refuses") {
		t.Fatalf("verify:\n%s", out)
	}
}
