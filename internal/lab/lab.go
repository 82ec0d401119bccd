// Package lab prepares a machine's student accounts for stem, as root:
// the account, subordinate ids no other account has, a runtime directory
// that lasts, the Podman configuration the host needs, stem's images in
// a shared image store (or the account's own), the course's cards, a git identity
// and, optionally, the teacher's grant. Every step checks before it acts
// and reports "ok" (done now), "already" or "failed", so running it again
// changes nothing. Accounts it prepared are listed in the lab's roster
// (name,USER@HOST), which the teacher imports with `stemctl class import`.
//
// Threat model: root works for students whose homes are theirs to fill
// with anything, symbolic links included. So root never writes in a
// student's home itself: files, cards and the git identity are written
// by processes running as the student (Account.Command), images are
// loaded by the student's own Podman, and the grant is made by the
// student's own stemctl. Root writes only to root's places (/etc, /run/user,
// the lab directory). Root reads a home only to archive it (tar, which
// does not follow links) before removing the account. Lab never prepares
// or removes an account with a uid below 1000.
package lab

import (
	"context"
	"fmt"

	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lib/filelock"
)

// Options are the lab's settings; tests replace every path.
type Options struct {
	// Dir keeps the roster and the archives (/var/lib/stem/lab).
	Dir string
	// CacheDir keeps `podman save` archives of root's images.
	CacheDir string
	// Host is the machine's name in the roster's USER@HOST.
	Host string
	// Images are the references of root's images every account gets.
	Images []string
	// Shared is the image store every account reads (nil: each account
	// loads its own copy, as it also does when FUSE is not usable).
	Shared *Shared
	// Prune makes Update remove the shared images nothing uses.
	Prune bool
	// Cards is the course's workspace-shaped directory ("" for none).
	Cards string
	// ContainersConf is the containers.conf the host needs ("" none).
	ContainersConf string
	// Grant is the teacher's access for every account (nil for none).
	Grant *Grant
	// Stemctl is the stemctl every account can run (for the grant).
	Stemctl string

	// Lock is a machine-wide lock file in a directory only root writes
	// (/run/stem-lab.lock; not /run/lock, where a student could hold it):
	// two lab runs at once would otherwise pick the same free range of
	// subordinate ids, or lose each other's roster rows.
	Lock string

	SubIDs                idmap.Files
	LingerDir, SystemdDir string
	TmpfilesDir           string
	// Progress receives every step as it ends.
	Progress func(Step)
}

// Student is one account to prepare.
type Student struct {
	Name, FullName, Email string
}

// Add prepares each account, one after the other (subordinate ids are
// chosen against the accounts before it), and adds it to the roster.
// It returns every step and an error when any step failed.
func Add(ctx context.Context, o *Options, students []Student) ([]Step, error) {
	for _, s := range students {
		if err := ValidName(s.Name); err != nil {
			return nil, err
		}
	}
	return prepareAll(ctx, o, students, true)
}

// Update brings every account of the roster (or the named ones) up to
// date: images whose id changed are loaded, new cards copied, missing
// settings made, exactly as Add does, but a missing account is reported
// rather than made. The students' cards and files are left as they are.
func Update(ctx context.Context, o *Options, names []string) ([]Step, error) {
	if len(names) == 0 {
		rows, err := ReadRoster(o.Dir)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			names = append(names, r.Name)
		}
	}
	var students []Student
	for _, n := range names {
		if err := ValidName(n); err != nil {
			return nil, err
		}
		students = append(students, Student{Name: n})
	}
	steps, err := prepareAll(ctx, o, students, false)
	if o.Prune {
		st := locked(ctx, o, "system", "prune shared store", func() Step { return Prune(ctx, o) })
		if o.Progress != nil {
			o.Progress(st)
		}
		steps = append(steps, st)
		if st.Result == Failed && err == nil {
			err = fmt.Errorf("prune: %s", st.Detail)
		}
	}
	return steps, err
}

// prepareAll fills the shared store, then prepares each account.
func prepareAll(ctx context.Context, o *Options, students []Student, create bool) ([]Step, error) {
	ids, err := imageIDs(ctx, o.Images)
	if err != nil {
		return nil, err
	}
	sys, why := sharedImages(ctx, o, ids)
	all, err := each(ctx, o, students, ids, create, why)
	for _, st := range sys {
		if st.Result == Failed && err == nil {
			err = fmt.Errorf("%s: %s (the accounts keep their own images meanwhile)", st.Name, st.Detail)
		}
	}
	return append(sys, all...), err
}

// locked runs a step under the machine-wide lock.
func locked(ctx context.Context, o *Options, account, name string, step func() Step) Step {
	unlock, err := filelock.Lock(ctx, o.Lock, filelock.Exclusive)
	if err != nil {
		return Step{Account: account, Name: name, Result: Failed, Detail: err.Error()}
	}
	defer unlock()
	return step()
}

// imageIDs are root's ids of refs: what each account must have.
func imageIDs(ctx context.Context, refs []string) (map[string]string, error) {
	ids := map[string]string{}
	for _, ref := range refs {
		id, err := rootImageID(ctx, ref)
		if err != nil {
			return nil, err
		}
		ids[ref] = id
	}
	return ids, nil
}

func each(ctx context.Context, o *Options, students []Student, ids map[string]string, create bool, why string) ([]Step, error) {
	var all []Step
	var failed []string
	for _, s := range students {
		steps := addOne(ctx, o, s, ids, create, why)
		all = append(all, steps...)
		for _, st := range steps {
			if st.Result == Failed {
				failed = append(failed, s.Name)
				break
			}
		}
	}
	if len(failed) > 0 {
		return all, fmt.Errorf("not ready: %v (the failed steps say why; run it again once fixed)", failed)
	}
	return all, nil
}

// addOne prepares one account; why says why it cannot read the shared
// store ("" when it can).
func addOne(ctx context.Context, o *Options, s Student, ids map[string]string, create bool, why string) []Step {
	var steps []Step
	report := func(st Step) {
		steps = append(steps, st)
		if o.Progress != nil {
			o.Progress(st)
		}
	}
	a, st, err := ensureUser(ctx, s, create)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		report(st)
		return steps
	}
	report(st)
	report(locked(ctx, o, a.Name, "subordinate ids", func() Step { return ensureSubIDs(ctx, o, a) }))
	report(ensureRuntime(ctx, o, a))
	if why == "" {
		why = accountFuse(ctx, o.Shared, a)
	}
	report(ensurePodmanConfig(ctx, o, a, why))
	for _, ref := range o.Images {
		if why == "" {
			report(ensureSeen(ctx, a, ref, ids[ref]))
		} else {
			report(ensureImage(ctx, o, a, ref, ids[ref]))
		}
	}
	report(ensureCards(ctx, o, a))
	report(ensureGit(ctx, o, a, s))
	report(ensureGrant(ctx, o, a))
	report(locked(ctx, o, a.Name, "roster", func() Step { return addToRoster(o, a.Name) }))
	return steps
}

// Share makes FUSE usable and loads o.Images into the shared store (lab
// init): the part of Add that is the machine's, not an account's.
func Share(ctx context.Context, o *Options) ([]Step, error) {
	ids, err := imageIDs(ctx, o.Images)
	if err != nil {
		return nil, err
	}
	steps, _ := sharedImages(ctx, o, ids)
	for _, st := range steps {
		if st.Result == Failed {
			return steps, fmt.Errorf("%s: %s", st.Name, st.Detail)
		}
	}
	return steps, nil
}
