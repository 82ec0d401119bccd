// Package engine is the small interface stem needs from a container engine.
// The Podman implementation (package engine/podman) is the only place that
// imports the Podman bindings; everything else depends on this interface so
// it can be tested without a daemon and so stem-mcp never links them.
package engine

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) when a container or image does not exist.
var ErrNotFound = errors.New("not found")

// ErrHalfStarted is returned (wrapped) by Start when the OCI runtime still
// holds the state of an earlier start of the container that never
// finished (an engine killed while it started it): the container cannot
// start again, but removing it and creating it anew works.
var ErrHalfStarted = errors.New("the container was half started by an engine that stopped")

// Mount is a bind mount.
type Mount struct {
	Source   string `json:"source"`
	Dest     string `json:"dest"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Spec describes a container to create.
type Spec struct {
	Name      string            `json:"name"`
	Image     string            `json:"image"`
	Command   []string          `json:"command"`
	Env       map[string]string `json:"env,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Mounts    []Mount           `json:"mounts,omitempty"`
	Devices   []string          `json:"devices,omitempty"` // host paths, passed as-is
	WorkDir   string            `json:"workdir,omitempty"`
	MemoryMiB int64             `json:"memory_mib,omitempty"`
	Pids      int64             `json:"pids,omitempty"`
	CPUs      float64           `json:"cpus,omitempty"`
	Network   string            `json:"network,omitempty"` // "none" or "" (engine default)
	Init      bool              `json:"init,omitempty"`    // run an init (catatonit) as PID 1

	// Hardening, for containers whose processes stem does not trust to
	// stay within their task (the agent sandbox). The zero value is the
	// engine's default, which the student's container keeps.

	// User is "uid:gid" for the command and every exec ("" = the image's).
	User string `json:"user,omitempty"`
	// IDMap, when set, gives the container a user namespace of its own in
	// which ids 0 to Size-1 are Base and up as the engine counts ids (the
	// host's rootful; the account's user namespace rootless); nil is the
	// engine's default.
	IDMap *IDMap `json:"id_map,omitempty"`
	// DropAllCaps empties every capability set, the bounding set included.
	DropAllCaps bool `json:"drop_all_caps,omitempty"`
	// NoNewPrivileges stops setuid and file capabilities from raising a
	// process's privileges (and is inherited by every exec).
	NoNewPrivileges bool `json:"no_new_privileges,omitempty"`
	// NoNewNamespaces stops the container's processes from making or
	// entering namespaces and from mounting (a user namespace would make
	// a process without capabilities root of its own namespace).
	NoNewNamespaces bool `json:"no_new_namespaces,omitempty"`
	// ReadOnlyRoot mounts the image's root filesystem read-only; Tmpfs
	// gives writable scratch space.
	ReadOnlyRoot bool    `json:"read_only_root,omitempty"`
	Tmpfs        []Tmpfs `json:"tmpfs,omitempty"`
}

// IDMap is a contiguous id mapping, the same for uids and gids.
type IDMap struct {
	Base uint32 `json:"base"`
	Size uint32 `json:"size"`
}

// Tmpfs is a memory-backed writable directory, nosuid and nodev, and
// noexec unless Exec.
type Tmpfs struct {
	Dest    string `json:"dest"`
	SizeMiB int64  `json:"size_mib"`
	Exec    bool   `json:"exec,omitempty"`
}

// Container is what we read back from the engine.
type Container struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Image    string            `json:"image"`
	ImageID  string            `json:"image_id"`
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"` // created, running, exited, ...
	Running  bool              `json:"running"`
	Pid      int               `json:"pid"`
	Created  time.Time         `json:"created"`
	ExitCode int               `json:"exit_code"`
}

// ExecSpec is a process to run inside a running container.
type ExecSpec struct {
	Cmd     []string
	Env     map[string]string
	WorkDir string
	Tty     bool
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Resize, with Tty, carries the local terminal's size: the first value
	// once the process starts, then one per change (SIGWINCH).
	Resize <-chan TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct{ Rows, Cols int }

// Image is a local image.
type Image struct {
	ID      string            `json:"id"`
	Names   []string          `json:"names"`
	Created time.Time         `json:"created"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Engine is the container engine as stem uses it.
type Engine interface {
	// Ping checks the service answers and returns its version.
	Ping(ctx context.Context) (string, error)
	ImageInspect(ctx context.Context, ref string) (Image, error)
	Create(ctx context.Context, spec Spec) (string, error)
	Start(ctx context.Context, id string) error
	Inspect(ctx context.Context, nameOrID string) (Container, error)
	// List returns containers (running or not) carrying every given label.
	List(ctx context.Context, labels map[string]string) ([]Container, error)
	Stop(ctx context.Context, id string, timeout time.Duration) error
	Remove(ctx context.Context, id string, force bool) error
	// Exec runs a process and returns its exit code.
	Exec(ctx context.Context, id string, spec ExecSpec) (int, error)
	// MemoryBytes is the container's current memory use (cgroup).
	MemoryBytes(ctx context.Context, id string) (uint64, error)
	// LogTail returns the last lines the container's command wrote
	// (stdout and stderr interleaved), for error messages.
	LogTail(ctx context.Context, id string, lines int) (string, error)
	// Rename renames a container, running or not. Podman's names are
	// unique, so a container re-created while its predecessor is kept
	// takes a second name first, and gets the usual one back once the
	// predecessor is gone.
	Rename(ctx context.Context, id, name string) error
}
