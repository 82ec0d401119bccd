package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lib/posixacl"
)

// subRange is one line of /etc/subuid or /etc/subgid.
type subRange struct {
	owner        string
	start, count uint64
}

func readRanges(file string) ([]subRange, error) {
	fh, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []subRange
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 {
			continue
		}
		s, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil {
			out = append(out, subRange{f[0], s, n})
		}
	}
	return out, sc.Err()
}

// freeRange is FreeRange as usermod's argument.
func freeRange(e *Env) string {
	start := FreeRange(e.SubIDs)
	return fmt.Sprintf("%d-%d", start, start+idmap.Size-1)
}

// FreeRange is the start of the first range of idmap.Size ids, from
// 100000 on a multiple of idmap.Size, that no line of either file
// touches: what usermod should give an account that has none.
func FreeRange(files idmap.Files) uint64 {
	var all []subRange
	for _, f := range []string{files.SubUID, files.SubGID} {
		rs, _ := readRanges(f)
		all = append(all, rs...)
	}
	start := uint64(100000)
	for again := true; again; {
		again = false
		for _, r := range all {
			if r.start < start+idmap.Size && start < r.start+r.count {
				start = (r.start + r.count + idmap.Size - 1) / idmap.Size * idmap.Size
				again = true
			}
		}
	}
	return start
}

// CheckSubIDs is the subordinate-ids check alone (e needs User, UID and
// SubIDs), for an administrator preparing the account.
func CheckSubIDs(e *Env) Result { return checkSubIDs(e) }

// CheckLinger is the runtime-dir-lasts check alone (e needs User, UID,
// GID, LingerDir and SystemdDir).
func CheckLinger(e *Env) Result { return checkLinger(e) }

// CheckRuntimeDir is the runtime-dir check alone (e needs User, UID, GID
// and Runtime), for an administrator checking the account.
func CheckRuntimeDir(e *Env) Result { return checkRuntimeDir(e) }

func checkSubIDs(e *Env) Result {
	r := Result{Name: "subordinate-ids", Required: true}
	if !e.Rootless() {
		r.Status = OK
		r.Detail = fmt.Sprintf("rootful: containers run as host ids %d-%d", idmap.RootfulBase, idmap.RootfulBase+idmap.Size-1)
		return r
	}
	rng := freeRange(e)
	fix := e.asRoot(fmt.Sprintf("usermod --add-subuids %s --add-subgids %s %s", rng, rng, e.User))
	m, err := callerMap(e)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, firstLine(err.Error()), fix
		if errors.Is(err, idmap.ErrNoSubordinate) {
			r.Detail = "none for " + e.User + " in " + e.SubIDs.SubUID + " or " + e.SubIDs.SubGID + ": stem runs the account's containers as its subordinate ids"
		}
		return r
	}
	// Two accounts sharing ids would own each other's container files.
	uid := strconv.Itoa(e.UID)
	for _, f := range []string{e.SubIDs.SubUID, e.SubIDs.SubGID} {
		rs, err := readRanges(f)
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("read %s: %v", f, err), fix
			return r
		}
		for _, a := range rs {
			if a.owner != e.User && a.owner != uid {
				continue
			}
			for _, o := range rs {
				if o.owner != e.User && o.owner != uid && a.start < o.start+o.count && o.start < a.start+a.count {
					r.Status = Fail
					r.Detail = fmt.Sprintf("%s: the range %d+%d overlaps %s's %d+%d: the two accounts' containers would share host ids", f, a.start, a.count, o.owner, o.start, o.count)
					r.Fix = e.asRoot(fmt.Sprintf("usermod --del-subuids %d-%d --del-subgids %d-%d %s && usermod --add-subuids %s --add-subgids %s %s",
						a.start, a.start+a.count-1, a.start, a.start+a.count-1, e.User, rng, rng, e.User))
					return r
				}
			}
		}
	}
	if m.Size < idmap.Size {
		r.Status, r.Fix = Warn, fix
		r.Detail = fmt.Sprintf("only %d ids from %d: images' users above %d (nobody is 65534) have no host id", m.Size, m.Host, m.Size-1)
		return r
	}
	r.Status = OK
	r.Detail = fmt.Sprintf("containers run as host ids %d-%d", m.Host, m.Host+m.Size-1)
	return r
}

func checkRuntimeDir(e *Env) Result {
	r := Result{Name: "runtime-dir", Required: true}
	fix := e.asRoot(fmt.Sprintf("install -d -m 0700 -o %s -g %d %s", e.User, e.GID, e.Runtime))
	fi, err := os.Stat(e.Runtime)
	if errors.Is(err, os.ErrNotExist) && !e.Rootless() {
		r.Status, r.Detail = OK, e.Runtime+" is made on first use"
		return r
	}
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s: %v (XDG_RUNTIME_DIR: Podman's socket and stem's socket directories live there)", e.Runtime, err), fix
		return r
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		r.Status, r.Detail = Fail, e.Runtime+" is not a directory"
	case st != nil && int(st.Uid) != e.UID:
		r.Status, r.Detail = Fail, fmt.Sprintf("%s belongs to uid %d, not %s", e.Runtime, st.Uid, e.User)
		fix = e.asRoot(fmt.Sprintf("chown %s:%d %s", e.User, e.GID, e.Runtime))
	case fi.Mode().Perm()&0o066 != 0:
		// Search (x) for others is what rootless Podman leaves once a
		// container on mapped ids ran (0711): they need to pass through.
		r.Status, r.Detail = Fail, fmt.Sprintf("%s has mode %04o: other accounts could list or make files there, next to the sockets", e.Runtime, fi.Mode().Perm())
		fix = "chmod go-rw " + e.Runtime
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("%s (%04o, yours)", e.Runtime, fi.Mode().Perm())
		return r
	}
	r.Fix = fix
	return r
}

func checkLinger(e *Env) Result {
	r := Result{Name: "runtime-dir-lasts", Status: OK}
	switch {
	case !e.Rootless():
		r.Detail = "root's Podman service does not depend on a login"
	case exists(filepath.Join(e.LingerDir, e.User)):
		r.Detail = "linger is on: the runtime directory and Podman stay after logout"
	case e.TmpfilesDir != "" && bootLine(e):
		r.Detail = "a tmpfiles.d line makes " + e.Runtime + " at boot; without logind nothing removes it at logout"
	case exists(e.SystemdDir):
		r.Status = Warn
		r.Detail = "no linger: logind removes " + e.Runtime + " and stops the account's Podman (and its instances) at logout"
		r.Fix = e.asRoot("loginctl enable-linger " + e.User)
	default:
		r.Status = Warn
		r.Detail = "no logind: " + e.Runtime + " outlives logout but not a reboot"
		r.Fix = e.asRoot(fmt.Sprintf("echo 'd %s 0700 %s %d -' > %s", e.Runtime, e.User, e.GID, TmpfilesPath("/etc/tmpfiles.d", e.User)))
	}
	return r
}

// TmpfilesPath is the tmpfiles.d file that makes name's runtime directory
// at boot on a host without logind.
func TmpfilesPath(dir, name string) string { return filepath.Join(dir, "stem-"+name+".conf") }

// bootLine says whether the account's tmpfiles.d file makes its runtime
// directory.
func bootLine(e *Env) bool {
	data, err := os.ReadFile(TmpfilesPath(e.TmpfilesDir, e.User))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "d" && f[1] == e.Runtime {
			return true
		}
	}
	return false
}

// checkACL sets an ACL naming the containers' uid on a temporary file in
// dir and reads it back: stem gives containers the card and the socket
// directory that way.
func checkACL(name, dir string, e *Env) Result {
	r := Result{Name: name, Required: true}
	fix := "keep " + dir + " on ext4, XFS, Btrfs or tmpfs (not NFS), or remount it with ACLs: " + e.asRoot("mount -o remount,acl MOUNTPOINT")
	if _, err := os.Stat(dir); err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("not tried: %v", err)
		r.Fix = "see " + map[bool]string{true: "workspace", false: "runtime-dir"}[name == "acl-workspace"]
		return r
	}
	uid := uint32(idmap.RootfulBase)
	if m, err := callerMap(e); err == nil {
		uid = m.Host
	}
	f, err := os.CreateTemp(dir, ".stem-doctor-acl-*")
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("not tried: %v", err), "chown "+e.User+" "+dir
		return r
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fd := int(f.Fd())
	err = posixacl.Set(fd, false, posixacl.FromMode(0o600).With(uid, posixacl.Read|posixacl.Write))
	var got posixacl.ACL
	if err == nil {
		got, err = posixacl.Get(fd, false)
	}
	if err == nil {
		if ent, ok := got.Find(posixacl.User, uid); !ok || ent.Perm != posixacl.Read|posixacl.Write {
			err = fmt.Errorf("the ACL read back lacks the entry for uid %d", uid)
		}
	}
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, dir+": "+err.Error(), fix
		return r
	}
	r.Status, r.Detail = OK, dir+" keeps POSIX ACLs"
	return r
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return p != "" && err == nil
}
