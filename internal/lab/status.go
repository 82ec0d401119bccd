package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
)

// Status is one account's readiness: root's own checks (rootChecks)
// and, for the rest, `stemctl doctor` run as the account.
type Status struct {
	Name  string `json:"name"`
	Host  string `json:"host"`
	Ready bool   `json:"ready"`
	// Missing names the failing required checks, or the reason doctor
	// could not run.
	Missing []string `json:"missing,omitempty"`
	// Warnings names the checks that are not fine but not required.
	Warnings []string `json:"warnings,omitempty"`
	Checks   []Result `json:"checks,omitempty"`
	// DoctorFix is root's command for an account whose doctor gave no
	// report (the reason is in Missing).
	DoctorFix string `json:"doctor_fix,omitempty"`
}

// Result is one check's result and who answered it: ByRoot, or
// ByAccount (the account's doctor, which the student could make print
// anything).
type Result struct {
	doctor.Result
	By string `json:"by"`
}

// report is `stemctl doctor --json`'s shape.
type report struct {
	OK     bool            `json:"ok"`
	Checks []doctor.Result `json:"checks"`
}

// Check runs stemctl doctor as each account of the roster, a few at a
// time; the answers keep the roster's order.
func Check(ctx context.Context, o *Options, names []string) ([]Status, error) {
	rows, err := ReadRoster(o.Dir)
	if err != nil {
		return nil, err
	}
	hosts := map[string]string{}
	for _, r := range rows {
		hosts[r.Name] = r.Host
	}
	if len(names) == 0 {
		for _, r := range rows {
			names = append(names, r.Name)
		}
	}
	// Each doctor waits mostly on its account's Podman service: several
	// at once finish a class in a fraction of the time, and a few bound
	// the load on the machine.
	out := make([]Status, len(names))
	sem := make(chan struct{}, statusParallel)
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = checkOne(ctx, o, n, hosts[n])
		}()
	}
	wg.Wait()
	return out, nil
}

// statusParallel is how many accounts' doctors run at once.
const statusParallel = 4

// checkOne checks account n of the roster.
func checkOne(ctx context.Context, o *Options, n, host string) Status {
	a, err := Lookup(n)
	if err == nil {
		err = a.ordinary()
	}
	if err != nil {
		return Status{Name: n, Host: host, Missing: []string{"account: " + err.Error()}}
	}
	return verify(ctx, o, a, host)
}

// Doctor checks one account as Check checks each of the roster's (lab
// doctor NAME); the account need not be in the roster.
func Doctor(ctx context.Context, o *Options, name string) (*Account, Status, error) {
	a, err := Lookup(name)
	if err == nil {
		err = a.ordinary()
	}
	if err != nil {
		return nil, Status{}, err
	}
	// The roster only adds the host; an account lab did not add is
	// checked all the same.
	rows, _ := ReadRoster(o.Dir)
	host := ""
	for _, r := range rows {
		if r.Name == a.Name {
			host = r.Host
		}
	}
	return a, verify(ctx, o, a, host), nil
}

// verify is root's own checks of a, then stemctl doctor run as a for
// the rest, with root's answers in place of the account's.
func verify(ctx context.Context, o *Options, a *Account, host string) Status {
	st := Status{Name: a.Name, Host: host}
	mine := rootChecks(o, a)
	theirs, err := accountDoctor(ctx, o, a)
	st.Checks = merge(theirs, mine)
	if err != nil {
		st.Missing = []string{err.Error()}
		st.DoctorFix = doctorFix(o, a, err)
	}
	for _, c := range st.Checks {
		switch {
		case c.Status == doctor.Fail && c.Required:
			st.Missing = append(st.Missing, c.Name)
		case c.Status != doctor.OK:
			st.Warnings = append(st.Warnings, c.Name)
		}
	}
	st.Ready = len(st.Missing) == 0
	return st
}

// doctorFix is what root runs when a's doctor gave no report: make
// stemctl runnable by every account, or see the doctor's own error.
func doctorFix(o *Options, a *Account, err error) string {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("(as root) install -m 0755 %s /usr/local/bin/stemctl   (and stem-mcp beside it: every account runs them)", o.Stemctl)
	}
	return fmt.Sprintf("(as root) runuser -l %s -c '%s doctor'   (its own error shows)", a.Name, o.Stemctl)
}

// accountDoctor runs stemctl doctor --json as the account.
func accountDoctor(ctx context.Context, o *Options, a *Account) ([]doctor.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cmd := a.Command(cctx, o.Stemctl, "doctor", "--json")
	if fi, err := os.Stat(a.Home); err != nil || !fi.IsDir() {
		// Without a home the doctor still runs, and says so.
		cmd.Dir = "/"
	}
	data, err := cmd.Output()
	cancel()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("doctor: %w", err)
	}
	var rep report
	if jerr := json.Unmarshal(data, &rep); jerr != nil {
		return nil, fmt.Errorf("doctor: %v (%v)", jerr, err)
	}
	if !rep.OK && !doctor.Failed(rep.Checks) {
		// Its verdict and its checks disagree: believe neither.
		return rep.Checks, fmt.Errorf("doctor: says not ok with no failed requirement")
	}
	return rep.Checks, nil
}
