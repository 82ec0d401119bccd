package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
)

// Status is one account's readiness: root's own checks (RootChecked)
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

// checkOne checks account n: root's own checks, then stemctl doctor run
// as the account for the rest.
func checkOne(ctx context.Context, o *Options, n, host string) Status {
	st := Status{Name: n, Host: host}
	a, err := Lookup(n)
	if err == nil {
		err = a.ordinary()
	}
	if err != nil {
		st.Missing = []string{"account: " + err.Error()}
		return st
	}
	mine := rootChecks(o, a)
	theirs, err := accountDoctor(ctx, o, a)
	st.Checks = merge(theirs, mine)
	if err != nil {
		st.Missing = []string{err.Error()}
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

// accountDoctor runs stemctl doctor --json as the account.
func accountDoctor(ctx context.Context, o *Options, a *Account) ([]doctor.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	data, err := a.Command(cctx, o.Stemctl, "doctor", "--json").Output()
	cancel()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("doctor: %v", err)
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
