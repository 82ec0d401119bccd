// Package sockets owns the runtime socket layout:
//
//	$XDG_RUNTIME_DIR/stem/<thread-key>/<instance-key>/<cid12>/{t.sock,n.sock,g.sock,a-<agent-id>.sock,gdb-sync.json,container.json}
//
// Every directory is 0700 and owned by the current user; no symlink is
// followed while creating or checking it; every socket path is asserted to be
// shorter than MaxPath bytes. The container id is part of the path, so a
// re-created container never serves a predecessor's socket.
package sockets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/beneath"
	"github.com/stem-edu/stem/internal/posixacl"
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
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSocket == 0 {
			what := "not a socket"
			if fi.Mode()&os.ModeSymlink != 0 {
				what = "a symlink, not a socket"
			}
			return &NotOursError{p, what + " (something inside the container replaced it)"}
		}
	}
	return nil
}

// RemoveStale removes every container directory of an instance except keep
// (a cid12, or "" to remove all). It refuses to act on a symlinked or foreign
// instance directory. It returns the removed paths.
func (l Layout) RemoveStale(threadKey, instanceKey, keep string) ([]string, error) {
	return l.removeEntries(threadKey, instanceKey, func(e os.DirEntry) bool { return e.Name() != keep })
}

// entries lists an instance directory (none if it is missing), refusing a
// symlinked or foreign one.
func (l Layout) entries(threadKey, instanceKey string) (string, []os.DirEntry, error) {
	dir := l.InstanceDir(threadKey, instanceKey)
	if err := checkDir(dir, true); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return dir, nil, nil
		}
		return dir, nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return dir, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return dir, ents, nil
}

// removeEntries removes the entries of an instance directory that pick
// chooses (RemoveAll follows no symlink inside them) and returns their
// paths. A missing instance directory has none.
func (l Layout) removeEntries(threadKey, instanceKey string, pick func(os.DirEntry) bool) ([]string, error) {
	dir, ents, err := l.entries(threadKey, instanceKey)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		if !pick(e) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("remove stale socket directory %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// IsCID12 reports whether name has the form of a container directory's
// name: the 12 lower-case hex digits of a container id prefix.
func IsCID12(name string) bool {
	return len(name) == 12 && cidRE.MatchString(name)
}

// Siblings lists an instance's container directories other than keep (a
// cid12): real directories, not symlinks, whose names are container id
// prefixes. They are a predecessor's, left behind (a crash, a container
// removed behind stem's back). Anything else in the instance directory is
// not listed, and RemoveSiblings leaves it alone.
func (l Layout) Siblings(threadKey, instanceKey, keep string) ([]string, error) {
	if !validKey(threadKey) || !validKey(instanceKey) {
		return nil, fmt.Errorf("invalid socket keys %q/%q", threadKey, instanceKey)
	}
	dir, ents, err := l.entries(threadKey, instanceKey)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if isSibling(e, keep) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// isSibling: ReadDir's type comes from lstat semantics, so a symlink is
// never reported as a directory.
func isSibling(e os.DirEntry, keep string) bool {
	return e.Name() != keep && IsCID12(e.Name()) && e.IsDir() && e.Type()&os.ModeSymlink == 0
}

// RemoveSiblings removes the directories Siblings lists and returns them.
func (l Layout) RemoveSiblings(threadKey, instanceKey, keep string) ([]string, error) {
	if !validKey(threadKey) || !validKey(instanceKey) {
		return nil, fmt.Errorf("invalid socket keys %q/%q", threadKey, instanceKey)
	}
	return l.removeEntries(threadKey, instanceKey, func(e os.DirEntry) bool { return isSibling(e, keep) })
}

// The container can write its socket directory's parent, the instance
// directory it has mounted: it can rename <cid12> away and put a symlink
// to any host directory in its place at any moment. The instance directory
// itself is the mount point, which the container cannot replace, so host-
// side reads and writes in a socket directory go through internal/beneath
// below it: <cid12>/name is opened, created, replaced or removed relative
// to a descriptor of the instance directory with no symlink followed.

// beneathDir splits a socket directory into the instance directory (the
// root) and the slash-separated path of name below it.
func beneathDir(dir, name string) (root, rel string) {
	dir = filepath.Clean(dir)
	return filepath.Dir(dir), filepath.Base(dir) + "/" + name
}

// WriteJSON writes v as JSON to name inside the socket directory dir
// atomically (beneath.WriteFileAtomic below dir's parent): a temporary file
// in the same directory, fsync, then rename. Neither dir nor name is ever
// followed if it is a symlink (rename replaces a link at name itself).
func WriteJSON(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	root, rel := beneathDir(dir, name)
	// 0640: the directory (0700, or its ACL naming the container and the
	// student) decides who reads; the mask must let the other party read.
	if err := beneath.WriteFileAtomic(root, rel, append(data, '\n'), 0o640); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// WriteFileAtomic replaces path with data via a same-directory temp file
// (beneath.WriteFileAtomic with path's directory as the root). It resolves
// that directory as given: use it only for paths stem alone controls (its
// state and config directories); in a socket directory or the card
// repository use WriteJSON or internal/beneath.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	err := beneath.WriteFileAtomic(filepath.Dir(path), filepath.Base(path), data, mode)
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return err
}

// maxJSON bounds a JSON file read from a socket directory.
const maxJSON = 1 << 20

// ReadJSON reads name inside the socket directory dir into v: opened below
// dir's parent with no symlink followed (internal/beneath, O_NONBLOCK so a
// planted FIFO does not block), a regular file of at most 1 MiB.
func ReadJSON(dir, name string, v any) error {
	p := filepath.Join(dir, name)
	root, rel := beneathDir(dir, name)
	data, err := beneath.ReadFile(root, rel, maxJSON)
	if err != nil {
		if errors.Is(err, beneath.ErrNotRegular) || errors.Is(err, beneath.ErrTooLarge) {
			return fmt.Errorf("read %s: not a regular file under 1 MiB: %w", p, err)
		}
		return fmt.Errorf("read %s: %w", p, err)
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", p, err)
	}
	return nil
}

// Lstat describes name in d without following d or name (see ReadJSON).
func (d Dir) Lstat(name string) (os.FileInfo, error) {
	root, rel := beneathDir(d.Path, name)
	return beneath.Lstat(root, rel)
}

// Remove removes name (not a directory) in d without following d or name:
// a <cid12> swapped for a symlink makes it fail, never remove a file of the
// directory the link names.
func (d Dir) Remove(name string) error {
	root, rel := beneathDir(d.Path, name)
	return beneath.Remove(root, rel)
}

// RemoveSocket removes name in d if it is a socket (a dead server's),
// leaving anything else there, as Remove does not follow anything.
func (d Dir) RemoveSocket(name string) error {
	fi, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return &NotOursError{filepath.Join(d.Path, name), "not a socket"}
	}
	return d.Remove(name)
}

// Listen binds a unix socket at name in d with mode 0660, following
// neither d nor name: the bind goes through /proc/self/fd/N/name, N being
// d opened below its parent (the instance directory), and the chmod
// through an O_PATH descriptor of the socket node it made. (A bind or
// chmod by path through a swapped <cid12> would create a socket in a host
// directory, or chmod a host file a planted symlink names.) The listener
// does not unlink its path on Close: remove the socket with RemoveSocket.
func (d Dir) Listen(name string) (*net.UnixListener, error) {
	p := filepath.Join(d.Path, name)
	clean := filepath.Clean(d.Path)
	df, err := beneath.OpenDir(filepath.Dir(clean), filepath.Base(clean))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p, err)
	}
	defer df.Close()
	via := "/proc/self/fd/" + strconv.Itoa(int(df.Fd())) + "/" + name
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: via, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", p, err)
	}
	fd, err := unix.Openat(int(df.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fail(errors.New("the name was replaced by something that is not a socket"))
	}
	// 0660: with the directory's ACL (internal/cardaccess) the group bits
	// are the mask, which the container's root needs to connect; without
	// one the directory (0700) keeps everyone else out.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o660); err != nil {
		return fail(err)
	}
	return ln, nil
}

// ContainerInfo is written to container.json by stemctl after creation.
type ContainerInfo struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Instance  string            `json:"instance"`
	Profile   string            `json:"profile"`
	Image     string            `json:"image"`
	Labels    map[string]string `json:"labels"`
	Created   string            `json:"created"`
	TmuxVer   string            `json:"tmux_version,omitempty"`
	SocketDir string            `json:"socket_dir"`
}
