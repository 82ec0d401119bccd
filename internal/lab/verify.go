package lab

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stem-edu/stem/internal/doctor"
)

// Who answered a check in Status.
const (
	ByRoot    = "root"
	ByAccount = "account"
)

// rootChecks are the facts about account a that root reads itself, with
// no process of the account's involved: the student owns their account
// and everything run as it (its doctor, its shell, any process it may
// trace), so only these cannot be made to say "ready".
func rootChecks(o *Options, a *Account) []doctor.Result {
	e := &doctor.Env{User: a.Name, UID: a.UID, GID: a.GID, Runtime: a.Runtime(), SubIDs: o.SubIDs,
		LingerDir: o.LingerDir, SystemdDir: o.SystemdDir, TmpfilesDir: o.TmpfilesDir}
	rs := []doctor.Result{doctor.CheckSubIDs(e), doctor.CheckRuntimeDir(e), doctor.CheckLinger(e)}
	if r, ok := storeCheck(o.Shared); ok {
		rs = append(rs, r)
	}
	return rs
}

// storeCheck says whether every account can read the shared store: each
// directory from / to its image list searchable by all, the list and the
// FUSE device readable (and writable) by all, as lab init leaves them.
// Only the mode bits are read, by root: no account's process takes part.
// ok is false when lab gives the accounts no shared store (none, or FUSE
// not usable, so each keeps its own images), leaving the check to the
// account's doctor.
func storeCheck(s *Shared) (doctor.Result, bool) {
	if s == nil || s.fuseReady() != "" {
		return doctor.Result{}, false
	}
	r := doctor.Result{Name: "shared-store", Required: true, Status: doctor.Fail,
		Fix: "(as root) stemctl lab init --shared-store " + s.Root + " (it fills the store and makes it readable)"}
	list := filepath.Join(s.Root, "overlay-images", "images.json")
	for dir := filepath.Dir(list); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			r.Detail = fmt.Sprintf("the shared store: %v", err)
			return r, true
		}
		if !fi.IsDir() || fi.Mode().Perm()&0o001 == 0 {
			r.Detail = fmt.Sprintf("%s (%04o) is not searchable by the accounts", dir, fi.Mode().Perm())
			return r, true
		}
		if dir == "/" || dir == "." {
			break
		}
	}
	fi, err := os.Stat(list)
	switch {
	case err != nil:
		r.Detail = fmt.Sprintf("the shared store has no images: %v", err)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0:
		r.Detail = fmt.Sprintf("%s (%04o) is not readable by the accounts", list, fi.Mode().Perm())
	default:
		r.Status, r.Fix = doctor.OK, ""
		r.Detail = fmt.Sprintf("%s readable by every account, %s usable", s.Root, s.Fuse)
	}
	return r, true
}

// merge puts root's results in place of the account's of the same name
// (the account's order kept, root's others at the end) and marks each
// with who answered it. An account's answer to a check root made is
// dropped, however many times it gives one.
func merge(account, root []doctor.Result) []Result {
	byRoot := map[string]doctor.Result{}
	for _, r := range root {
		byRoot[r.Name] = r
	}
	done := map[string]bool{}
	var out []Result
	for _, r := range account {
		rr, ok := byRoot[r.Name]
		switch {
		case ok && !done[r.Name]:
			out = append(out, Result{Result: rr, By: ByRoot})
			done[r.Name] = true
		case !ok:
			out = append(out, Result{Result: r, By: ByAccount})
		}
	}
	for _, r := range root {
		if !done[r.Name] {
			out = append(out, Result{Result: r, By: ByRoot})
		}
	}
	return out
}
