// Package agentstore is the record of every running agent of an account
// ($XDG_RUNTIME_DIR/stem/agents/ID) and its supervisor's state: what
// `agent list`, `agent stop` and the gate's status read without linking the
// launcher or the supervisor.
package agentstore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/lib/procstat"
	"github.com/stem-edu/stem/internal/lib/statefile"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/sockets"
)

// Modes of an agent.
const (
	ModeWindow = "window" // terminal in a tmux window of the student's session
	ModeHere   = "here"   // in the terminal of the stemctl that started it
)

// Record describes a running agent. It lives in the agent's directory
// $XDG_RUNTIME_DIR/stem/agents/<id>/agent.json; the directory goes away with
// the agent (stop, or `agent list` finding its process gone).
type Record struct {
	ID          string    `json:"id"`
	Provider    string    `json:"provider"`
	Adapter     string    `json:"adapter"`
	Instance    string    `json:"instance"`
	ContainerID string    `json:"container_id"`
	Level       string    `json:"level"`
	Mode        string    `json:"mode"`
	Started     time.Time `json:"started"`
	// PID is the process that owns the agent: `stemctl agent run` for a
	// window, the `stemctl agent start --here` process otherwise. PIDStart
	// is its start time in clock ticks since boot (guards against pid
	// reuse).
	PID         int             `json:"pid"`
	PIDStart    uint64          `json:"pid_start"`
	ProviderPID int             `json:"provider_pid,omitempty"`
	Socket      string          `json:"socket,omitempty"`
	Window      string          `json:"window,omitempty"`
	Pane        string          `json:"pane,omitempty"`
	WorkDir     string          `json:"workdir"`
	Dir         string          `json:"dir"`
	Context     string          `json:"context"`
	Argv        []string        `json:"argv"`
	MCP         mcpconfig.Entry `json:"mcp"`
	Log         string          `json:"log,omitempty"`
	// Sandbox is the name of the agent's sandbox container (window mode).
	Sandbox string `json:"sandbox,omitempty"`
	// Egress are the endpoints its sandbox may reach.
	Egress []string `json:"egress,omitempty"`
}

// Status is a record with what was observed about it.
type Status struct {
	Record
	Running bool   `json:"running"`
	Problem string `json:"problem,omitempty"`
	// Waiting says what the CLI asks its user (a first-run dialog, a
	// permission prompt), as its supervisor read it from the window.
	Waiting string `json:"waiting,omitempty"`
}

// Store is the set of agent directories of one account.
type Store struct {
	// Root is $XDG_RUNTIME_DIR/stem/agents.
	Root string
	// LogDir keeps the supervisors' logs ($STATE/agents).
	LogDir string
}

// NewStore returns the store for a socket layout and state directory.
func NewStore(l sockets.Layout, stateDir string) Store {
	return Store{Root: filepath.Join(l.Root(), "agents"), LogDir: filepath.Join(stateDir, "agents")}
}

var idRE = regexp.MustCompile(`^[0-9a-f]{6}$`)

// ValidID reports whether s looks like an agent id.
func ValidID(s string) bool { return idRE.MatchString(s) }

// Dir is an agent's directory.
func (s Store) Dir(id string) string { return filepath.Join(s.Root, id) }

// Create makes a new agent directory (0700) with a fresh id.
func (s Store) Create() (string, string, error) {
	if err := MkdirPrivate(s.Root); err != nil {
		return "", "", err
	}
	for range 16 {
		var b [sockets.AgentIDLen / 2]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		d := s.Dir(id)
		err := os.Mkdir(d, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("create agent directory: %w", err)
		}
		return id, d, nil
	}
	return "", "", errors.New("could not pick a free agent id")
}

// MkdirPrivate makes p (and its parents) a directory of this user's with
// mode 0700, refusing one of another user's.
func MkdirPrivate(p string) error {
	if err := os.MkdirAll(p, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you", p, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(p, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Write stores rec in its directory atomically.
func (s Store) Write(rec Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return sockets.WriteFileAtomic(filepath.Join(s.Dir(rec.ID), "agent.json"), append(data, '\n'), 0o600)
}

// Read loads one record.
func (s Store) Read(id string) (Record, error) {
	if !ValidID(id) {
		return Record{}, fmt.Errorf("%q is not an agent id (six hex digits, see stemctl agent list)", id)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(id), "agent.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Record{}, fmt.Errorf("no agent %s (stemctl agent list shows the running ones)", id)
		}
		return Record{}, err
	}
	var rec Record
	path := filepath.Join(s.Dir(id), "agent.json")
	if err := statefile.Unmarshal("agent "+id+"'s record", path, data, &rec,
		"stem no longer knows this agent; if `ps -ef | grep "+id+"` shows its supervisor, end it with kill, then remove the record with `rm -r "+s.Dir(id)+"`"); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// ReadState loads the supervisor's state of an agent (absent for --here
// agents and before the agent started).
func (s Store) ReadState(id string) (State, error) {
	var st State
	if !ValidID(id) {
		return st, fmt.Errorf("invalid agent id %q", id)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(id), StateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("agent %s: %s: %w", id, StateFile, err)
	}
	return st, nil
}

// RemoveSocket removes the agent's socket, which a killed supervisor leaves
// behind (only a socket of that name: the directory is the container's too).
func RemoveSocket(rec Record) {
	if rec.Socket != "" && filepath.Base(rec.Socket) == sockets.AgentSocket(rec.ID) {
		sockets.Dir{Path: filepath.Dir(rec.Socket)}.RemoveSocket(filepath.Base(rec.Socket))
	}
}

// Remove deletes an agent's directory.
func (s Store) Remove(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("invalid agent id %q", id)
	}
	return os.RemoveAll(s.Dir(id))
}

// List returns every agent with its liveness, oldest first. Directories of
// agents whose process is gone are removed (prune) when prune is true;
// directories still being set up (no agent.json yet, younger than a
// minute) are skipped.
func (s Store) List(prune bool) ([]Status, error) {
	ents, err := os.ReadDir(s.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, e := range ents {
		if !e.IsDir() || !ValidID(e.Name()) {
			continue
		}
		rec, err := s.Read(e.Name())
		var corrupt *statefile.CorruptError
		if errors.As(err, &corrupt) {
			// Never pruned: its supervisor may still run, and the file is
			// the only trace of it the user has.
			out = append(out, Status{Record: Record{ID: e.Name()}, Problem: err.Error()})
			continue
		}
		if err != nil {
			if fi, serr := os.Stat(s.Dir(e.Name())); prune && serr == nil && time.Since(fi.ModTime()) > time.Minute {
				s.Remove(e.Name())
			}
			continue
		}
		st := Status{Record: rec, Running: Alive(rec.PID, rec.PIDStart)}
		if !st.Running {
			if prune {
				RemoveSocket(rec)
				s.Remove(rec.ID)
				continue
			}
			st.Problem = "its process is gone"
			if ss, err := s.ReadState(rec.ID); err == nil && ss.Stopping != "" {
				st.Problem = "it ended: " + ss.Stopping
			}
		} else if rec.Mode == ModeWindow {
			// The supervisor knows before its process ends that the agent
			// is going: say so rather than show a window that is gone.
			if ss, err := s.ReadState(rec.ID); err == nil {
				switch {
				case ss.Stopping != "":
					st.Problem = "ending: " + ss.Stopping
				case ss.Windows == 0:
					st.Problem = "ending: its window was closed (it gets a few seconds in case one comes back)"
				default:
					st.Waiting = ss.Waiting
				}
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	if prune {
		s.pruneLogs(out)
	}
	return out, nil
}

// logKeep is how long the logs of ended agents are kept.
const logKeep = 7 * 24 * time.Hour

func (s Store) pruneLogs(live []Status) {
	ents, err := os.ReadDir(s.LogDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !ValidID(id) {
			continue
		}
		if slices.ContainsFunc(live, func(st Status) bool { return st.ID == id }) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > logKeep {
			os.Remove(filepath.Join(s.LogDir, e.Name()))
		}
	}
}

// Alive reports whether pid is running and started at start (clock ticks
// since boot, field 22 of /proc/PID/stat).
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	got, err := procstat.Start(pid)
	if err != nil {
		return false
	}
	return start == 0 || got == start
}

// State is what a supervisor says about its running agent, for `agent
// list` and `agent stop`: StateFile in the agent's directory, rewritten when
// the number of connected windows changes and when the agent is stopped.
type State struct {
	// Windows is how many relays (tmux windows) are connected.
	Windows int       `json:"windows"`
	Since   time.Time `json:"since"`
	// Stopping says why the supervisor is ending the agent.
	Stopping string `json:"stopping,omitempty"`
	// Waiting says what the CLI asks its user (a first-run dialog, a
	// permission prompt), read from its window; "" when it does not.
	Waiting string `json:"waiting,omitempty"`
}

// StateFile is the supervisor's state in the agent directory.
const StateFile = "state.json"

// WriteState replaces the supervisor's state in dir.
func WriteState(dir string, st State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return sockets.WriteFileAtomic(filepath.Join(dir, StateFile), append(data, '\n'), 0o600)
}
