package sockets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/lib/beneath"
)

// The container can write its socket directory's parent, the instance
// directory it has mounted: it can rename <cid12> away and put a symlink
// to any host directory in its place at any moment. The instance directory
// itself is the mount point, which the container cannot replace, so host-
// side reads and writes in a socket directory go through internal/lib/beneath
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
// (beneath.ReplaceFile). It resolves
// that directory as given: use it only for paths stem alone controls (its
// state and config directories); in a socket directory or the card
// repository use WriteJSON or internal/lib/beneath.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return beneath.ReplaceFile(path, data, mode)
}

// maxJSON bounds a JSON file read from a socket directory.
const maxJSON = 1 << 20

// ReadJSON reads name inside the socket directory dir into v: opened below
// dir's parent with no symlink followed (internal/lib/beneath, O_NONBLOCK so a
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
