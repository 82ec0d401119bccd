package class

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/termtext"
)

// Defaults of Options.
const (
	DefaultTimeout   = 15 * time.Second
	DefaultParallel  = 32
	DefaultMaxAnswer = 256 << 10
	maxStderr        = 16 << 10
	maxInstances     = 64
	maxAgents        = 8
	maxField         = 200
)

// Options configure Status.
type Options struct {
	// Resolve turns a student into the ssh target that reaches their gate
	// (checks the key, chooses the dialer); notes are advice for the
	// teacher. Required.
	Resolve func(ctx context.Context, s Student) (teacherkey.Target, []string, error)
	SSH     string        // the ssh program; "" is "ssh"
	Timeout time.Duration // per student, from its start to its row
	// Parallel bounds the students asked at once (each is an ssh process).
	Parallel  int
	MaxAnswer int // bytes of a gate's answer before it counts as broken
}

// Row is one student's line of the status table. Every string in it that
// came from the student's machine is one clean line of bounded length.
type Row struct {
	Student string `json:"student"`
	Dest    string `json:"host"`
	Reach   Reach  `json:"reach"`
	Why     string `json:"why,omitempty"`
	Fix     string `json:"fix,omitempty"`
	// ClaimedAccount is the account the student's gate says it runs as:
	// the student's claim, not the roster's (Dest is the roster's).
	ClaimedAccount string     `json:"claimed_account,omitempty"`
	Grant          string     `json:"grant,omitempty"`
	Level          string     `json:"level,omitempty"`
	Expires        *time.Time `json:"expires,omitempty"`
	Instances      []Instance `json:"instances"`
	// Activity is the latest of the instances' (absent when no tmux
	// answered); Work comes from the session events a hub saw.
	Activity *time.Time `json:"activity,omitempty"`
	Work     *Work      `json:"work,omitempty"`
	Flags    []Flag     `json:"flags"`
	Millis   int64      `json:"elapsed_ms"`
	// Via is how the row was asked: "session" (the open MCP session's
	// gate_status) or "ssh" (a new connection for the status verb).
	Via    string   `json:"via,omitempty"`
	Notes  []string `json:"-"`
	unsafe bool     // the SSH session had a terminal or agent forwarding
}

// Instance is one instance the student's grant allows.
type Instance struct {
	Instance string `json:"instance"`
	Profile  string `json:"profile,omitempty"`
	Series   string `json:"series,omitempty"`
	Card     string `json:"card,omitempty"`
	Task     string `json:"task,omitempty"`
	Target   string `json:"target,omitempty"`
	// State: "answers" (tmux and Neovim both answer), "no tmux",
	// "no nvim", "down" (neither), or "not started".
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Activity: the last output in the student's tmux or key from their
	// terminal, as that tmux reports it.
	Activity *time.Time `json:"activity,omitempty"`
	Agents   []Agent    `json:"agents,omitempty"`
}

// Agent is an agent running in a student's instance: the gate's wire
// struct, each string cleaned (fromStatus).
type Agent = gatestatus.Agent

// Status asks every student's gate for its status at once, each within
// opt.Timeout, and returns one row per student in the order given.
func Status(ctx context.Context, students []Student, opt Options) []Row {
	if opt.Parallel <= 0 {
		opt.Parallel = DefaultParallel
	}
	rows := make([]Row, len(students))
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	for i, s := range students {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				rows[i] = probe(ctx, s, opt)
			case <-ctx.Done():
				rows[i] = failed(s, failure{ReachTimeout, "not asked: " + ctx.Err().Error(), ""}, 0)
			}
		}()
	}
	wg.Wait()
	return rows
}

// probe asks one student's gate for `status`.
func probe(ctx context.Context, s Student, opt Options) Row {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxAnswer := opt.MaxAnswer
	if maxAnswer <= 0 {
		maxAnswer = DefaultMaxAnswer
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if opt.Resolve == nil {
		return failed(s, failure{ReachSetup, "no way to reach students configured", ""}, 0)
	}
	tg, notes, err := opt.Resolve(ctx, s)
	if err != nil {
		return failed(s, failure{ReachSetup, err.Error(), "fix the roster's key or ssh_options (stemctl class list shows them)"}, time.Since(start))
	}
	args, err := tg.Command("status")
	if err != nil {
		return failed(s, failure{ReachSetup, err.Error(), "fix the student's host, port or the class's ssh_options"}, time.Since(start))
	}
	ssh := opt.SSH
	if ssh == "" {
		ssh = "ssh"
	}
	stdout := &capped{max: maxAnswer, full: cancel}
	stderr := &capped{max: maxStderr}
	cmd := exec.CommandContext(ctx, ssh, args...)
	cmd.Stderr = stderr
	// ssh and its ProxyCommand are one process group, killed together; a
	// child that keeps stderr open cannot hold Wait beyond WaitDelay. The
	// answer on stdout is read to its end first: only ssh holds that pipe
	// (the ProxyCommand's stdout is ssh's socket), and ctx kills ssh, so
	// the read is bounded; WaitDelay can then never cut the answer short
	// however slowly this process is scheduled.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	var runErr error
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		runErr = err
	} else {
		io.Copy(stdout, out) // ends at EOF, or when stdout is full (which cancels)
		runErr = cmd.Wait()
	}
	if errors.Is(runErr, exec.ErrWaitDelay) {
		// ssh exited 0 and its answer was read whole; its ProxyCommand
		// held stderr a little longer.
		runErr = nil
	}
	took := time.Since(start)
	switch {
	case stdout.over:
		return failed(s, failure{ReachBroken, fmt.Sprintf("the answer went on past %d bytes (cut off)", maxAnswer), "the account's forced command is not stem-mcp gate? the student runs `stemctl access check`"}, took)
	case ctx.Err() != nil:
		return failed(s, failure{ReachTimeout, fmt.Sprintf("no answer within %v", timeout), "is the student's machine overloaded or asleep? a longer --timeout waits more"}, took)
	}
	if runErr != nil {
		var ee *exec.ExitError
		if !errors.As(runErr, &ee) {
			return failed(s, failure{ReachSetup, runErr.Error(), "is OpenSSH's ssh installed?"}, took)
		}
		return failed(s, classify(s, ee.ExitCode(), stderr.String()), took)
	}
	var st gatestatus.Status
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return failed(s, failure{ReachBroken, fmt.Sprintf("the answer is not the gate's status (%v): %s", err, clean(stdout.String())), "the account's forced command is not stem-mcp gate? the student runs `stemctl access check`"}, took)
	}
	return rowOf(s, st, took, notes)
}

// rowOf checks and turns a gate's status into the student's row.
func rowOf(s Student, st gatestatus.Status, took time.Duration, notes []string) Row {
	if _, err := levels.Parse(st.Level); err != nil {
		return failed(s, failure{ReachBroken, fmt.Sprintf("the answer names level %q", clean(st.Level)), "the student's stem-mcp may be of another version"}, took)
	}
	r := fromStatus(s, st)
	r.Millis, r.Notes, r.Via = took.Milliseconds(), notes, "ssh"
	r.Flags = triage(r, time.Now())
	return r
}

// fromStatus turns the gate's answer into a row, cleaned and bounded.
func fromStatus(s Student, st gatestatus.Status) Row {
	r := Row{Student: s.Name, Dest: s.Dest(), Reach: ReachOK, ClaimedAccount: clean(st.Account), Grant: clean(st.Grant), Level: st.Level, Expires: st.Expires}
	list := st.Instances
	if len(list) > maxInstances {
		r.Why = fmt.Sprintf("%d instances; the first %d are shown", len(list), maxInstances)
		list = list[:maxInstances]
	}
	r.Instances = make([]Instance, 0, len(list))
	for _, is := range list {
		in := Instance{Instance: clean(is.Instance), Profile: clean(is.Profile), Series: clean(is.Series), Card: clean(is.Card),
			Task: clean(is.Task), Target: clean(is.Target), Error: clean(is.Error), Activity: is.Activity}
		for _, a := range is.Agents[:min(len(is.Agents), maxAgents)] {
			in.Agents = append(in.Agents, Agent{Provider: clean(a.Provider), Level: clean(a.Level), Started: a.Started, Problem: clean(a.Problem)})
		}
		if in.Activity != nil && (r.Activity == nil || in.Activity.After(*r.Activity)) {
			r.Activity = in.Activity
		}
		switch {
		case !is.Registered:
			in.State = "not started"
		case is.Tmux && is.Nvim:
			in.State = "answers"
		case is.Tmux:
			in.State = "no nvim"
		case is.Nvim:
			in.State = "no tmux"
		default:
			in.State = "down"
		}
		r.Instances = append(r.Instances, in)
	}
	if st.Session.TTY || st.Session.AgentForwarded {
		r.unsafe = true
		r.Why = "the session got a terminal or agent forwarding: the student's authorized_keys line lost its restrict option"
		r.Fix = "the student runs `stemctl access check`"
	}
	return r
}

func failed(s Student, f failure, took time.Duration) Row {
	r := Row{Student: s.Name, Dest: s.Dest(), Reach: f.reach, Why: clean(f.why), Fix: f.fix, Instances: []Instance{}, Millis: took.Milliseconds()}
	r.Flags = triage(r, time.Now())
	return r
}

func clean(s string) string { return termtext.Line(s, maxField) }

// Flag is a reason a student may need the teacher.
type Flag string

const (
	FlagInstanceDown Flag = "instance-down" // registered, but tmux or Neovim does not answer (crashed, stopped)
	FlagCrashed      Flag = "crashed"       // a program crashed within FailWindow
	FlagFailing      Flag = "failing"       // FailedBuilds or more failed builds or tests within FailWindow
	FlagIdle         Flag = "idle"          // nothing in the student's tmux for IdleAfter
	FlagUnreachable  Flag = "unreachable"
	FlagBroken       Flag = "broken"    // the gate's answer is garbage, endless or refused oddly
	FlagNoAccess     Flag = "no-access" // key refused, grant revoked or expired
	FlagSetup        Flag = "setup"     // a problem on the teacher's side
	FlagUnsafeKey    Flag = "unsafe-key"
	FlagNotStarted   Flag = "not-started" // a granted instance was never started
	FlagNoInstance   Flag = "no-instance"
	// FlagGone: a student whose open session ended (their gate died or
	// their connection dropped) while the teacher watched; the hub tries
	// again meanwhile.
	FlagGone Flag = "gone"
)

// rank orders flags by how soon the teacher should look.
var rank = map[Flag]int{
	FlagInstanceDown: 90, FlagCrashed: 85, FlagUnreachable: 80, FlagGone: 80, FlagBroken: 80, FlagFailing: 75, FlagNoAccess: 70,
	FlagSetup: 60, FlagUnsafeKey: 50, FlagIdle: 40, FlagNotStarted: 30, FlagNoInstance: 20,
}

// triage derives a row's flags from what the gate's status and the
// session events say, as of now.
func triage(r Row, now time.Time) []Flag {
	f := []Flag{}
	switch r.Reach {
	case ReachOK:
	case ReachHostKeyUnknown, ReachHostKeyChanged, ReachRefused, ReachUnresolved, ReachUnreachable, ReachTimeout:
		return append(f, FlagUnreachable)
	case ReachKeyRefused, ReachRevoked, ReachExpired, ReachGateRefused:
		return append(f, FlagNoAccess)
	case ReachSetup:
		return append(f, FlagSetup)
	default:
		return append(f, FlagBroken)
	}
	down, notStarted := false, false
	for _, in := range r.Instances {
		switch in.State {
		case "answers":
		case "not started":
			notStarted = true
		default:
			down = true
		}
	}
	if down {
		f = append(f, FlagInstanceDown)
	}
	if r.Work != nil && r.Work.CrashedRecently {
		f = append(f, FlagCrashed)
	}
	if r.Work != nil && r.Work.FailedRecently >= FailedBuilds {
		f = append(f, FlagFailing)
	}
	if r.Activity != nil && now.Sub(*r.Activity) >= IdleAfter {
		f = append(f, FlagIdle)
	}
	if r.unsafe {
		f = append(f, FlagUnsafeKey)
	}
	if notStarted {
		f = append(f, FlagNotStarted)
	}
	if len(r.Instances) == 0 {
		f = append(f, FlagNoInstance)
	}
	return f
}

// Need is how soon the row wants the teacher: its highest flag's rank.
func (r Row) Need() int {
	n := 0
	for _, f := range r.Flags {
		n = max(n, rank[f])
	}
	return n
}

// SortByNeed puts the students who need help first, then by name.
func SortByNeed(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := rows[i].Need(), rows[j].Need(); a != b {
			return a > b
		}
		return rows[i].Student < rows[j].Student
	})
}

// capped keeps at most max bytes; past that it records the overflow,
// calls full (which stops the process) and fails the write. It has no
// ReadFrom (an embedded bytes.Buffer would give it one, and io.Copy would
// use that and never stop).
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
	full func()
}

var errFull = errors.New("output limit reached")

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.over && c.full != nil {
			c.full()
		}
		c.over = true
		if c.full != nil {
			return 0, errFull
		}
		return len(p), nil // stderr: keep the start, drop the rest quietly
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }
