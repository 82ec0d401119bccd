// Package sockets owns the runtime socket layout:
//
//	$XDG_RUNTIME_DIR/stem/<thread-key>/<instance-key>/<cid12>/{t.sock,n.sock,g.sock,a-<agent-id>.sock,gdb-sync.json,container.json}
//
// Every directory is 0700 and owned by the current user (a socket
// directory may also carry an ACL entry for the container's own uid, which
// internal/cardaccess grants; the owning group and others get nothing); no
// symlink is followed while creating or checking it; every socket path is asserted to be
// shorter than MaxPath bytes. The container id is part of the path, so a
// re-created container never serves a predecessor's socket.
package sockets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/stem-edu/stem/internal/lib/posixacl"
)

// MaxPath is our bound on AF_UNIX socket paths (the kernel's sun_path is 108
// bytes including the NUL; we keep a margin).
const MaxPath = 100

// File names inside a socket directory.
const (
	TmuxSocket    = "t.sock"
	NvimSocket    = "n.sock"
	GDBSocket     = "g.sock"
	GDBSync       = "gdb-sync.json"
	ContainerJSON = "container.json"
)

// AgentIDLen is the length of an agent id (hex digits): its terminal's
// socket, AgentSocket(id), is the longest name in a socket directory.
const AgentIDLen = 6

// AgentSocket is the name of agent id's terminal socket.
func AgentSocket(id string) string { return "a-" + id + ".sock" }

// socketNames are the sockets whose full paths must fit MaxPath. The agent
// socket is included so a directory that `up` accepts also takes agents.
var socketNames = []string{TmuxSocket, NvimSocket, GDBSocket, AgentSocket(strings.Repeat("0", AgentIDLen))}

// SelectedDir is the directory holding the `current` selection symlink.
const SelectedDir = "mcp-selected"

var (
	// Lengths are checked apart (8-16, 64): a bounded repetition compiles
	// to that many copies of the class, paid at every start-up.
	keyRE = regexp.MustCompile(`^[0-9a-f]+$`)
	cidRE = regexp.MustCompile(`^[0-9a-f]+$`)
)

// ThreadKey is the short key of a workspace: two workspaces on one account
// never share socket directories.
func ThreadKey(workspace string) string { return shortHash("thread\x00"+workspace, 8) }

// InstanceKey is the short key of an instance's full name.
func InstanceKey(instance string) string { return shortHash("instance\x00"+instance, 10) }

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// Layout is rooted at $XDG_RUNTIME_DIR/stem.
type Layout struct {
	Runtime string // $XDG_RUNTIME_DIR
}

// Root is Runtime/stem.
func (l Layout) Root() string { return filepath.Join(l.Runtime, "stem") }

// InstanceDir is the parent of an instance's per-container directories.
func (l Layout) InstanceDir(threadKey, instanceKey string) string {
	return filepath.Join(l.Root(), threadKey, instanceKey)
}

// Selected is the `current` symlink path of the MCP selection.
func (l Layout) Selected() string { return filepath.Join(l.Root(), SelectedDir, "current") }

// Dir is one container's socket directory.
type Dir struct {
	Path        string `json:"path"`
	ContainerID string `json:"container_id"`
}

// PathTooLongError reports a socket path over MaxPath.
type PathTooLongError struct {
	Path string
	Len  int
}

func (e *PathTooLongError) Error() string {
	return fmt.Sprintf("socket path %s is %d bytes, over the %d-byte limit for Unix sockets: use a shorter XDG_RUNTIME_DIR (for example /run/user/$(id -u))", e.Path, e.Len, MaxPath)
}

func validKey(k string) bool { return len(k) >= 8 && len(k) <= 16 && keyRE.MatchString(k) }

// ForContainer returns the directory for a container. It validates the keys
// and the full container id and checks every socket path length; it does not
// touch the filesystem.
func (l Layout) ForContainer(threadKey, instanceKey, containerID string) (Dir, error) {
	if !validKey(threadKey) || !validKey(instanceKey) {
		return Dir{}, fmt.Errorf("invalid socket keys %q/%q", threadKey, instanceKey)
	}
	if len(containerID) != 64 || !cidRE.MatchString(containerID) {
		return Dir{}, fmt.Errorf("invalid container id %q: want 64 hex digits", containerID)
	}
	if !filepath.IsAbs(l.Runtime) {
		return Dir{}, fmt.Errorf("runtime directory %q is not absolute", l.Runtime)
	}
	d := Dir{Path: filepath.Join(l.InstanceDir(threadKey, instanceKey), containerID[:12]), ContainerID: containerID}
	if err := CheckLengths(d.Path); err != nil {
		return Dir{}, err
	}
	return d, nil
}

// CheckLengths asserts every socket in dir fits MaxPath.
func CheckLengths(dir string) error {
	for _, n := range socketNames {
		p := filepath.Join(dir, n)
		if len(p) >= MaxPath {
			return &PathTooLongError{Path: p, Len: len(p)}
		}
	}
	// The selection path is fixed-length relative to the runtime root; it is
	// checked by the selection code.
	return nil
}

// CID12 is the container id prefix used in paths.
func (d Dir) CID12() string { return filepath.Base(d.Path) }

// Tmux, Nvim, GDB, GDBSync and ContainerJSON return file paths inside d.
func (d Dir) Tmux() string          { return filepath.Join(d.Path, TmuxSocket) }
func (d Dir) Nvim() string          { return filepath.Join(d.Path, NvimSocket) }
func (d Dir) GDB() string           { return filepath.Join(d.Path, GDBSocket) }
func (d Dir) GDBSync() string       { return filepath.Join(d.Path, GDBSync) }
func (d Dir) ContainerJSON() string { return filepath.Join(d.Path, ContainerJSON) }

// NotOursError says a directory fails the ownership/mode/symlink checks.
type NotOursError struct {
	Path   string
	Reason string
}

func (e *NotOursError) Error() string {
	return fmt.Sprintf("refusing to use %s: %s", e.Path, e.Reason)
}

// CheckRuntime verifies the runtime directory itself: a real directory (not
// a symlink) owned by us and not accessible to group or others.
func CheckRuntime(runtime string) error {
	err := checkDir(runtime, false)
	if err == nil {
		err = checkRuntimeMode(runtime)
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s does not exist: it is XDG_RUNTIME_DIR, which a login session (systemd-logind) creates; log in again, or set XDG_RUNTIME_DIR to a directory of yours with mode 0700: %w", runtime, os.ErrNotExist)
	}
	return err
}

// checkRuntimeMode allows the runtime directory search permission for
// others (0711) and nothing else: rootless Podman sets it so when a
// container's root is not the account (internal/idmap), for the OCI
// runtime to reach the container's files below it. Every level stem makes
// below is 0700.
func checkRuntimeMode(runtime string) error {
	fi, err := os.Lstat(runtime)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o066 != 0 {
		return &NotOursError{runtime, fmt.Sprintf("its mode is %04o; it must be 0700 (chmod 700 %s)", fi.Mode().Perm(), runtime)}
	}
	return nil
}

// checkDir Lstats path: it must be a directory, not a symlink, owned by the
// effective uid; with strict, group/other permission bits must be clear.
func checkDir(path string, strict bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return &NotOursError{path, "it is a symlink"}
	}
	if !fi.IsDir() {
		return &NotOursError{path, "it is not a directory"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &NotOursError{path, "cannot read its owner"}
	}
	if int(st.Uid) != os.Geteuid() {
		return &NotOursError{path, fmt.Sprintf("it is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid())}
	}
	if strict && fi.Mode().Perm()&0o077 != 0 && !privateACL(path, fi.Mode().Perm()) {
		return &NotOursError{path, fmt.Sprintf("its mode is %04o; it must be 0700 (chmod 700 %s)", fi.Mode().Perm(), path)}
	}
	return nil
}

// privateACL reports whether a directory whose group bits are set owes
// them to an ACL that names only users (stem names a container's root,
// internal/idmap): the owning group and others still have nothing.
func privateACL(path string, perm os.FileMode) bool {
	if perm&0o007 != 0 {
		return false
	}
	acl, err := posixacl.GetPath(path)
	if err != nil || acl == nil || acl.HasNamedGroups() {
		return false
	}
	g, ok := acl.Find(posixacl.GroupObj, 0)
	return ok && g.Perm == 0
}

// mkdirPrivate creates path (0700) if missing and then checks it strictly.
// An existing symlink or foreign directory is refused, never followed. It
// reports whether it made the directory.
func mkdirPrivate(path string) (bool, error) {
	made := true
	if err := os.Mkdir(path, 0o700); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("create %s: %w", path, err)
		}
		made = false
	}
	return made, checkDir(path, true)
}

// Create makes d and every level from the runtime's stem root down to it,
// each 0700 and checked. The runtime directory itself must already pass
// CheckRuntime.
func (l Layout) Create(d Dir) error {
	_, err := l.CreateLevels(d)
	return err
}

// CreateLevels is Create that also returns the directories it made, top
// first, so a caller whose work fails can take them away again
// (RemoveEmpty) and leave the runtime directory as it found it.
func (l Layout) CreateLevels(d Dir) ([]string, error) {
	if err := CheckRuntime(l.Runtime); err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	rel, err := filepath.Rel(l.Runtime, d.Path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("socket directory %s is not under %s", d.Path, l.Runtime)
	}
	var made []string
	// A level can vanish under us: another stemctl whose first start failed
	// removes the (then empty) levels it made. Start again from the top.
	for attempt := 0; ; attempt++ {
		cur := l.Runtime
		var err error
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			var m bool
			if m, err = mkdirPrivate(cur); m {
				made = append(made, cur)
			}
			if err != nil {
				break
			}
		}
		if err == nil || !errors.Is(err, os.ErrNotExist) || attempt == 2 {
			return made, err
		}
	}
}

// RemoveEmpty removes the directories CreateLevels made, deepest first,
// each only if it is empty (rmdir): what someone else put there since
// stays, and so does every level above it.
func RemoveEmpty(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		if err := os.Remove(made[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return
		}
	}
}

// Check verifies that every level of d exists with the right owner and mode
// and that no level is a symlink.
func (l Layout) Check(d Dir) error {
	if err := CheckRuntime(l.Runtime); err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	rel, err := filepath.Rel(l.Runtime, d.Path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("socket directory %s is not under %s", d.Path, l.Runtime)
	}
	cur := l.Runtime
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := checkDir(cur, true); err != nil {
			return err
		}
	}
	return nil
}

// CheckExisting checks every level from the runtime directory down to path
// that exists, stopping at the first missing one: what is there must be
// ours, private and not a symlink, but a missing level is fine (Create
// makes it).
func (l Layout) CheckExisting(path string) error {
	if err := CheckRuntime(l.Runtime); err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	rel, err := filepath.Rel(l.Runtime, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not under %s", path, l.Runtime)
	}
	cur := l.Runtime
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := checkDir(cur, true); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
	}
	return nil
}

// CheckSockets refuses a socket path that holds anything but a socket: the
// container can write into its directory, and a symlink planted in place of
// t.sock or n.sock would send the host's clients to some other socket. A
// missing socket is not an error here (the probes report it).
func (d Dir) CheckSockets() error {
	for _, p := range []string{d.Tmux(), d.Nvim(), d.GDB()} {
		if err := CheckSocket(p); err != nil {
			return err
		}
	}
	return nil
}

// CheckSocket is CheckSockets for one socket path.
func CheckSocket(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	if fi.Mode()&os.ModeSocket == 0 {
		what := "not a socket"
		if fi.Mode()&os.ModeSymlink != 0 {
			what = "a symlink, not a socket"
		}
		return &NotOursError{p, what + " (something inside the container replaced it)"}
	}
	return nil
}
