package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/workspace"
)

// Results of a step.
const (
	Done    = "ok"
	Already = "already"
	Failed  = "failed"
	Skipped = "skipped"
)

// Step is one thing lab did, or found done, for one account.
type Step struct {
	Account string `json:"account"`
	Name    string `json:"step"`
	Result  string `json:"result"`
	Detail  string `json:"detail,omitempty"`
}

// ensureUser makes the account when it is missing.
func ensureUser(ctx context.Context, s Student, create bool) (*Account, Step, error) {
	st := Step{Account: s.Name, Name: "account"}
	a, err := Lookup(s.Name)
	if err == nil {
		if err := a.ordinary(); err != nil {
			return nil, st, err
		}
		st.Result, st.Detail = Already, fmt.Sprintf("uid %d, home %s", a.UID, a.Home)
		return a, st, nil
	}
	if !create {
		return nil, st, fmt.Errorf("%w (stemctl lab add %s makes it)", err, s.Name)
	}
	comment := s.FullName
	if comment == "" {
		comment = s.Name
	}
	if err := passwd(ctx, "useradd", "-m", "-s", "/bin/bash", "-c", comment, s.Name); err != nil {
		return nil, st, err
	}
	// sshd without PAM refuses a locked account, which useradd leaves:
	// '*' is unlocked and still takes no password.
	if err := passwd(ctx, "usermod", "-p", "*", s.Name); err != nil {
		return nil, st, err
	}
	if a, err = Lookup(s.Name); err != nil {
		return nil, st, err
	}
	st.Result, st.Detail = Done, fmt.Sprintf("uid %d, home %s", a.UID, a.Home)
	return a, st, nil
}

// ensureSubIDs gives the account a range of subordinate ids no other
// account has, when it has none. A range that is too small or overlaps
// another's is reported with doctor's fix: changing it would give the
// account's existing container files to ids it no longer has.
func ensureSubIDs(ctx context.Context, o *Options, a *Account) Step {
	st := Step{Account: a.Name, Name: "subordinate ids"}
	e := &doctor.Env{User: a.Name, UID: a.UID, GID: a.GID, SubIDs: o.SubIDs}
	r := doctor.CheckSubIDs(e)
	if r.Status == doctor.OK {
		st.Result, st.Detail = Already, r.Detail
		return st
	}
	if _, err := idmap.Rootless(o.SubIDs, a.Name, strconv.Itoa(a.UID)); !errors.Is(err, idmap.ErrNoSubordinate) {
		st.Result, st.Detail = Failed, r.Detail+"; fix: "+r.Fix
		return st
	}
	start := doctor.FreeRange(o.SubIDs)
	rng := fmt.Sprintf("%d-%d", start, start+idmap.Size-1)
	if err := passwd(ctx, "usermod", "--add-subuids", rng, "--add-subgids", rng, a.Name); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, "containers run as host ids "+rng
	return st
}

// ensureRuntime makes /run/user/UID and keeps it past logout: linger
// where logind runs, else a tmpfiles.d line that makes it at boot.
func ensureRuntime(ctx context.Context, o *Options, a *Account) Step {
	st := Step{Account: a.Name, Name: "runtime directory"}
	var did []string
	dir := a.Runtime()
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if _, err := root(ctx, nil, "install", "-d", "-m", "0700", "-o", strconv.Itoa(a.UID), "-g", strconv.Itoa(a.GID), dir); err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
		did = append(did, "made "+dir)
	}
	e := &doctor.Env{User: a.Name, UID: a.UID, GID: a.GID, Runtime: dir, LingerDir: o.LingerDir, SystemdDir: o.SystemdDir, TmpfilesDir: o.TmpfilesDir}
	if r := doctor.CheckLinger(e); r.Status != doctor.OK {
		var err error
		if _, serr := os.Stat(o.SystemdDir); serr == nil {
			_, err = root(ctx, nil, "loginctl", "enable-linger", a.Name)
			did = append(did, "linger on")
		} else {
			line := fmt.Sprintf("d %s 0700 %d %d -\n", dir, a.UID, a.GID)
			err = os.WriteFile(tmpfilesPath(o, a.Name), []byte(line), 0o644)
			did = append(did, "made at boot by "+tmpfilesPath(o, a.Name))
		}
		if err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
	}
	if len(did) == 0 {
		st.Result, st.Detail = Already, dir+", lasts"
		return st
	}
	st.Result, st.Detail = Done, strings.Join(did, ", ")
	return st
}

func tmpfilesPath(o *Options, name string) string { return doctor.TmpfilesPath(o.TmpfilesDir, name) }

// plainStorageConf is what lab wrote for an account's own store before
// it stored images as the containers' ids: lab replaces it.
const plainStorageConf = "[storage]\ndriver = \"overlay\"\n"

// ensurePodmanConfig writes the account's storage.conf (reading the
// shared store unless why says why not) and, when the host needs one,
// containers.conf. A file the student changed is kept; one lab wrote
// for the other kind of store, or an older one of lab's, is replaced.
func ensurePodmanConfig(ctx context.Context, o *Options, a *Account, why string) Step {
	st := Step{Account: a.Name, Name: "podman config"}
	own := plainStorageConf
	if m, err := idmap.Rootless(o.SubIDs, a.Name, strconv.Itoa(a.UID)); err == nil {
		own = doctor.OwnStorageConf(m)
	}
	conf, mode := own, "own image store: "+why
	labs := []string{plainStorageConf, own}
	if o.Shared != nil {
		labs = append(labs, o.Shared.StorageConf())
		if why == "" {
			conf, mode = o.Shared.StorageConf(), "shared image store "+o.Shared.Root
		}
	}
	files := [][2]string{{".config/containers/storage.conf", conf}}
	if o.ContainersConf != "" {
		files = append(files, [2]string{".config/containers/containers.conf", o.ContainersConf})
	}
	var did, kept []string
	for _, f := range files {
		p := filepath.Join(a.Home, f[0])
		have, ok := a.readFile(ctx, p)
		switch {
		case ok && have == strings.TrimSpace(f[1]):
		case ok && !ours(have, labs):
			kept = append(kept, "~/"+f[0]+" differs, kept")
		default:
			if err := a.writeFile(ctx, p, f[1]); err != nil {
				st.Result, st.Detail = Failed, err.Error()
				return st
			}
			did = append(did, "~/"+f[0])
		}
	}
	st.Result = Already
	if len(did) > 0 {
		st.Result = Done
	}
	st.Detail = strings.Join(append(append(did, kept...), mode), ", ")
	return st
}

// ours says whether have is one of lab's own files.
func ours(have string, labs []string) bool {
	for _, l := range labs {
		if have == strings.TrimSpace(l) {
			return true
		}
	}
	return false
}

// ensureCards copies every card of the course's directory that the
// account's workspace lacks; a card already there is the student's and
// is left alone. The copy is unpacked as the student.
func ensureCards(ctx context.Context, o *Options, a *Account) Step {
	st := Step{Account: a.Name, Name: "cards"}
	if o.Cards == "" {
		st.Result, st.Detail = Skipped, "no --cards directory"
		return st
	}
	cards, err := courseCards(o.Cards)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	ws := workspace.DefaultRoot(func(string) string { return "" }, a.Home)
	script := `mkdir -p -- "$1" && cd -- "$1" && shift && for d; do [ -e "$d" ] || [ -L "$d" ] || echo "$d"; done`
	out, err := a.as(ctx, nil, "sh", append([]string{"-c", script, "sh", ws}, cards...)...)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	missing := strings.Fields(out)
	if len(missing) == 0 {
		st.Result, st.Detail = Already, fmt.Sprintf("%d cards in %s", len(cards), ws)
		return st
	}
	if err := copyTree(ctx, a, o.Cards, ws, missing); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, fmt.Sprintf("%d of %d cards copied to %s", len(missing), len(cards), ws)
	return st
}

// courseCards lists SERIES/CARD of every card (a directory with a
// stem.toml) of a workspace-shaped directory.
func courseCards(dir string) ([]string, error) {
	ws, err := workspace.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cards: %w", err)
	}
	series, err := ws.Series()
	if err != nil {
		return nil, fmt.Errorf("cards: %w", err)
	}
	var out []string
	for _, s := range series {
		cs, err := ws.Cards(s)
		if err != nil {
			return nil, fmt.Errorf("cards of %s: %w", s, err)
		}
		for _, c := range cs {
			out = append(out, s+"/"+c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cards: %s holds no SERIES/CARD/stem.toml", dir)
	}
	return out, nil
}

// copyTree streams paths of src as a tar archive made by root into tar
// run as the account in dst, so the files are the student's and nothing
// in the student's tree can redirect root's writes.
func copyTree(ctx context.Context, a *Account, src, dst string, paths []string) error {
	pack := exec.CommandContext(ctx, "tar", append([]string{"-C", src, "-c", "--"}, paths...)...)
	unpack := a.Command(ctx, "tar", "-C", dst, "-x", "--no-same-owner")
	pipe, err := pack.StdoutPipe()
	if err != nil {
		return err
	}
	var packErr strings.Builder
	pack.Stderr = &packErr
	if err := pack.Start(); err != nil {
		return fmt.Errorf("tar %s: %w", src, err)
	}
	_, uerr := run(unpack, pipe)
	perr := pack.Wait()
	if perr != nil {
		return fmt.Errorf("tar -C %s: %w: %s", src, perr, lastLine(packErr.String()))
	}
	return uerr
}

// ensureGit sets user.name and user.email when either is missing.
func ensureGit(ctx context.Context, o *Options, a *Account, s Student) Step {
	st := Step{Account: a.Name, Name: "git identity"}
	name, _ := a.as(ctx, nil, "git", "config", "--global", "--get", "user.name")
	email, _ := a.as(ctx, nil, "git", "config", "--global", "--get", "user.email")
	if name != "" && email != "" {
		st.Result, st.Detail = Already, fmt.Sprintf("%s <%s>", name, email)
		return st
	}
	if name == "" {
		name = s.FullName
		if name == "" {
			name = s.Name
		}
		if _, err := a.as(ctx, nil, "git", "config", "--global", "user.name", name); err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
	}
	if email == "" {
		email = s.Email
		if email == "" {
			email = s.Name + "@" + o.Host
		}
		if _, err := a.as(ctx, nil, "git", "config", "--global", "user.email", email); err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
	}
	st.Result, st.Detail = Done, fmt.Sprintf("%s <%s>", name, email)
	return st
}
