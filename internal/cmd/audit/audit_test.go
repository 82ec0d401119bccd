package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/audit"
	cmdaudit "github.com/stem-edu/stem/internal/cmd/audit"
	"github.com/stem-edu/stem/internal/cmd/audit/show"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

type env struct {
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
	log         *audit.Log
}

func newEnv(t *testing.T) *env {
	t.Helper()
	log, err := audit.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := iostreams.Test()
	return &env{
		f:   &cmdutil.Factory{IOStreams: ios, Audit: func() (*audit.Log, error) { return log, nil }},
		out: out, errOut: errOut, log: log,
	}
}

func (e *env) run(t *testing.T, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	cmd := cmdaudit.NewCmdAudit(e.f)
	cmd.SetArgs(args)
	cmd.SetOut(e.out)
	cmd.SetErr(e.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func (e *env) append(t *testing.T, entries ...audit.Entry) {
	t.Helper()
	for _, en := range entries {
		if _, err := e.log.Append(context.Background(), en); err != nil {
			t.Fatal(err)
		}
	}
}

// writeChain appends n tool calls and returns the file's lines.
func (e *env) writeChain(t *testing.T, n int) []string {
	t.Helper()
	for i := 0; i < n; i++ {
		e.append(t, audit.Entry{Event: audit.ToolCall, Account: "alice", Instance: "native-amd64-demo-hello-t1", Level: "observe",
			Tool: "pane_capture", ArgsDigest: audit.Digest(i), Result: "ok"})
	}
	data, err := os.ReadFile(e.log.Path())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestVerifyCommand(t *testing.T) {
	e := newEnv(t)
	// An account with no log yet has nothing to verify: not an error.
	if err := e.run(t, "verify"); err != nil || !strings.Contains(e.out.String(), "no audit log yet") {
		t.Fatalf("missing log: %v %q", err, e.out.String())
	}
	if err := e.run(t, "verify", "--file", filepath.Join(t.TempDir(), "nope.jsonl")); err == nil {
		t.Fatal("a missing --file verified")
	}
	lines := e.writeChain(t, 6)
	if err := e.run(t, "verify"); err != nil || e.out.String() != e.log.Path()+": chain intact, 6 lines\n" {
		t.Fatalf("intact: %v %q", err, e.out.String())
	}
	orig := slices.Clone(lines)

	for _, c := range []struct {
		name   string
		edit   func(l []string) []string
		broken int
		reason string
	}{
		{"tamper", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"level":"observe"`, `"level":"full"`, 1)
			return l
		}, 4, "does not match its hash"},
		{"delete", func(l []string) []string { return slices.Delete(l, 2, 3) }, 3, "prev does not match the hash of line 2"},
		// Line numbers are the file's, blank lines included (what sed -n Np shows).
		{"tamper after a blank line", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"tool":"pane_capture"`, `"tool":"pane_run"`, 1)
			return slices.Insert(l, 1, "")
		}, 5, "does not match its hash"},
		{"reorder", func(l []string) []string { l[1], l[4] = l[4], l[1]; return l }, 2, "prev does not match the hash of line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := c.edit(slices.Clone(orig))
			if err := os.WriteFile(e.log.Path(), []byte(strings.Join(edited, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := e.run(t, "verify")
			var ee *cmdutil.ExitError
			if !errors.As(err, &ee) || ee.Code != 4 {
				t.Fatalf("broken chain: err %v, want exit status 4", err)
			}
			want := fmt.Sprintf("%s: chain broken at line %d: ", e.log.Path(), c.broken)
			if !strings.HasPrefix(e.out.String(), want) || !strings.Contains(e.out.String(), c.reason) {
				t.Fatalf("output %q, want %q... %q", e.out.String(), want, c.reason)
			}
			err = e.run(t, "verify", "--json", "--file", e.log.Path())
			var res struct {
				File       string `json:"file"`
				OK         bool   `json:"ok"`
				BrokenLine int    `json:"broken_line"`
			}
			if jerr := json.Unmarshal(e.out.Bytes(), &res); jerr != nil || !errors.As(err, &ee) || res.OK || res.BrokenLine != c.broken || res.File != e.log.Path() {
				t.Fatalf("--json: %v %v %s", err, jerr, e.out.String())
			}
		})
	}
}

func TestShowFilters(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.append(t,
		audit.Entry{Time: now.Add(-72 * time.Hour), Event: audit.SessionStart, Account: "alice", Instance: "a", Level: "observe"},
		audit.Entry{Time: now.Add(-5 * time.Hour), Event: audit.ToolCall, Account: "alice", Instance: "a", Level: "full", Tool: "pane_run"},
		audit.Entry{Time: now.Add(-2 * time.Hour), Event: audit.ToolCall, Account: "bob", Instance: "b", Level: "assist", Tool: "nvim_open"},
		audit.Entry{Time: now.Add(-10 * time.Minute), Event: audit.Refused, Account: "bob", Instance: "b", Level: "full"},
	)
	seqs := func(t *testing.T, args ...string) []int64 {
		t.Helper()
		if err := e.run(t, append([]string{"show", "--json"}, args...)...); err != nil {
			t.Fatalf("show %v: %v", args, err)
		}
		var got []audit.Entry
		if err := json.Unmarshal(e.out.Bytes(), &got); err != nil {
			t.Fatalf("show %v: %v\n%s", args, err, e.out.String())
		}
		out := []int64{}
		for _, en := range got {
			out = append(out, en.Seq)
		}
		return out
	}
	since := now.Add(-3 * time.Hour).UTC().Format(time.RFC3339)
	until := now.Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		want []int64
	}{
		{nil, []int64{1, 2, 3, 4}},
		{[]string{"--instance", "a"}, []int64{1, 2}},
		{[]string{"--instance", "nope"}, []int64{}},
		{[]string{"--level", "full"}, []int64{2, 4}},
		{[]string{"--instance", "b", "--level", "full"}, []int64{4}},
		{[]string{"--since", "3h"}, []int64{3, 4}},
		{[]string{"--since", "1d"}, []int64{2, 3, 4}},
		{[]string{"--until", "1h"}, []int64{1, 2, 3}},
		{[]string{"--since", "6h", "--until", "1h"}, []int64{2, 3}},
		{[]string{"--since", since, "--until", until}, []int64{3}},
		{[]string{"--level", "full", "--since", "4h"}, []int64{4}},
		{[]string{"--limit", "1", "--instance", "a"}, []int64{2}},
	} {
		if got := seqs(t, c.args...); !slices.Equal(got, c.want) {
			t.Errorf("show %v = seq %v, want %v", c.args, got, c.want)
		}
	}

	// The table names the instance and level of each row.
	if err := e.run(t, "show", "--instance", "b"); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(e.out.String()), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "SEQ") || !strings.Contains(rows[1], "nvim_open") || !strings.Contains(rows[2], "refused") {
		t.Fatalf("table:\n%s", e.out.String())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, `--since: cannot read time "yesterday": use RFC 3339`},
		{[]string{"--until", "2026-13-01"}, `--until: cannot read time "2026-13-01"`},
		{[]string{"--since", "-2h"}, "cannot be negative"},
		{[]string{"--since", "1h", "--until", "2h"}, "is after --until"},
	} {
		err := e.run(t, append([]string{"show"}, c.args...)...)
		if !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("show %v: %v, want a usage error with %q", c.args, err, c.want)
		}
		if e.out.Len() != 0 {
			t.Errorf("show %v printed %q", c.args, e.out.String())
		}
	}
}

// A date as --until covers that whole (local) day.
func TestShowWholeDay(t *testing.T) {
	e := newEnv(t)
	day := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.Local) }
	e.append(t,
		audit.Entry{Time: day(9, 23, 59), Event: audit.ToolCall, Instance: "a"},
		audit.Entry{Time: day(10, 9, 0), Event: audit.ToolCall, Instance: "a"},
		audit.Entry{Time: day(10, 23, 30), Event: audit.ToolCall, Instance: "a"},
		audit.Entry{Time: day(11, 0, 0), Event: audit.ToolCall, Instance: "a"},
	)
	if err := e.run(t, "show", "--json", "--since", "2026-03-10", "--until", "2026-03-10"); err != nil {
		t.Fatal(err)
	}
	var got []audit.Entry
	if err := json.Unmarshal(e.out.Bytes(), &got); err != nil || len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 {
		t.Fatalf("one day: %v %s", err, e.out.String())
	}
}

func TestParseTime(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, loc)
	for _, c := range []struct {
		in          string
		since, till time.Time
	}{
		{"", time.Time{}, time.Time{}},
		{"24h", now.Add(-24 * time.Hour), now.Add(-24 * time.Hour)},
		{"90m", now.Add(-90 * time.Minute), now.Add(-90 * time.Minute)},
		{"7d", now.Add(-7 * 24 * time.Hour), now.Add(-7 * 24 * time.Hour)},
		{" 0d ", now, now},
		{"2026-11-01T10:00:00Z", time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)},
		{"2026-11-01T10:00:00.5+01:00", time.Date(2026, 11, 1, 9, 0, 0, 5e8, time.UTC), time.Date(2026, 11, 1, 9, 0, 0, 5e8, time.UTC)},
		{"2026-11-01 10:00", time.Date(2026, 11, 1, 10, 0, 0, 0, loc), time.Date(2026, 11, 1, 10, 0, 0, 0, loc)},
		{"2026-11-01T10:00", time.Date(2026, 11, 1, 10, 0, 0, 0, loc), time.Date(2026, 11, 1, 10, 0, 0, 0, loc)},
		{"2026-11-01", time.Date(2026, 11, 1, 0, 0, 0, 0, loc), time.Date(2026, 11, 2, 0, 0, 0, 0, loc).Add(-time.Nanosecond)},
	} {
		s, err := show.ParseTime(c.in, now)
		if err != nil || !s.Equal(c.since) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", c.in, s, err, c.since)
		}
		u, err := show.ParseUntil(c.in, now)
		if err != nil || !u.Equal(c.till) {
			t.Errorf("ParseUntil(%q) = %v, %v; want %v", c.in, u, err, c.till)
		}
	}
	for _, bad := range []string{"yesterday", "24", "1w", "-1h", "-3d", "2026-11-31", "11/01/2026", "2026-11-01 25:00", "999999999999d", "d", "1.5d"} {
		_, err := show.ParseTime(bad, now)
		if err == nil || !cmdutil.IsFlagError(err) || !strings.Contains(err.Error(), "--since") {
			t.Errorf("ParseTime(%q): %v, want a usage error naming --since", bad, err)
		}
	}
}
