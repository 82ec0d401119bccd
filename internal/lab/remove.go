package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lib/filelock"
)

// ArchiveDir is where Remove keeps each removed account's work.
func ArchiveDir(dir string) string { return filepath.Join(dir, "archive") }

// Remove archives the account's home (without its Podman storage and
// caches, which the images and containers fill), stops everything it
// runs, and deletes it with its home, runtime directory and roster row.
// Nothing is deleted unless the archive was written.
func Remove(ctx context.Context, o *Options, name string, now time.Time) ([]Step, error) {
	var steps []Step
	report := func(st Step) {
		steps = append(steps, st)
		if o.Progress != nil {
			o.Progress(st)
		}
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	a, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := a.ordinary(); err != nil {
		return nil, err
	}
	st := Step{Account: name, Name: "stop"}
	n := stopAll(ctx, o, a)
	st.Result, st.Detail = Done, fmt.Sprintf("%d processes ended", n)
	report(st)

	st = Step{Account: name, Name: "archive"}
	archive, err := archiveHome(ctx, o, a, now)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		report(st)
		return steps, fmt.Errorf("%s is not removed: its work could not be archived: %w", name, err)
	}
	st.Result, st.Detail = Done, archive
	report(st)

	st = Step{Account: name, Name: "account"}
	if _, err := os.Stat(filepath.Join(o.LingerDir, name)); err == nil {
		root(ctx, nil, "loginctl", "disable-linger", name)
	}
	if err := passwd(ctx, "userdel", "-r", name); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		report(st)
		return steps, err
	}
	os.Remove(tmpfilesPath(o, name))
	err = os.RemoveAll(a.Runtime())
	if err == nil {
		err = RemoveOwned(a.UID, PodmanTempDirs(a.UID)...)
	}
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		report(st)
		return steps, err
	}
	unlock, err := filelock.Lock(ctx, o.Lock, filelock.Exclusive)
	if err == nil {
		err = dropFromRoster(o.Dir, name)
		unlock()
	}
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		report(st)
		return steps, err
	}
	st.Result, st.Detail = Done, "removed with "+a.Home+", "+a.Runtime()+" and its roster row"
	report(st)
	return steps, nil
}

// PodmanTempDirs are where rootless Podman keeps an account's run state
// when it finds no runtime directory. They outlive the account, and an
// account made later with the same uid would find them its own.
func PodmanTempDirs(uid int) []string {
	var dirs []string
	for _, parent := range []string{"/tmp", "/var/tmp"} {
		for _, f := range []string{"containers-user-%d", "podman-run-%d"} {
			dirs = append(dirs, filepath.Join(parent, fmt.Sprintf(f, uid)))
		}
	}
	return dirs
}

// RemoveOwned removes each of dirs that is a directory owned by uid. It
// leaves anything else under those names alone: in a world-writable
// parent, another account can make a link or a directory there.
func RemoveOwned(uid int, dirs ...string) error {
	var errs []error
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != uid {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// archiveHome writes the home as a gzipped tar readable by root only
// (it is the student's work).
func archiveHome(ctx context.Context, o *Options, a *Account, now time.Time) (string, error) {
	dir := ArchiveDir(o.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, fmt.Sprintf("%s-%s.tar.gz", a.Name, now.UTC().Format("20060102T150405Z")))
	f, err := os.OpenFile(archive, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	f.Close()
	if _, err := root(ctx, nil, "tar", "-C", a.Home, "--one-file-system",
		"--exclude=./.local/share/containers", "--exclude=./.cache",
		"-czf", archive, "."); err != nil {
		os.Remove(archive)
		return "", err
	}
	return archive, nil
}

// stopAll removes the account's containers with its own Podman, then
// kills what is left of its processes and of its subordinate ids'
// (container processes), by pid, until none is left. It returns how many
// it killed.
func stopAll(ctx context.Context, o *Options, a *Account) int {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	a.Command(pctx, "podman", "rm", "-a", "-f", "-t", "0").Run()
	cancel()
	var lo, hi int = -1, -1
	if m, err := idmap.Rootless(o.SubIDs, a.Name, strconv.Itoa(a.UID)); err == nil {
		lo, hi = int(m.Host), int(m.Host)+int(m.Size)
	}
	mine := func(uid int) bool { return uid == a.UID || (uid >= lo && uid < hi) }
	killed := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		pids := processes(mine)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				killed++
			}
		}
		select {
		case <-ctx.Done():
			return killed
		case <-time.After(50 * time.Millisecond):
		}
	}
	return killed
}

// processes lists the pids whose real uid passes keep.
func processes(keep func(uid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if uid, err := strconv.Atoi(f[0]); err == nil && keep(uid) {
						out = append(out, pid)
					}
				}
				break
			}
		}
	}
	return out
}
