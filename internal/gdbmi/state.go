package gdbmi

import (
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/sockets"
)

// Program states as mirrored in gdb-sync.json and reported by Status.
const (
	StateNotStarted = "not-started"
	StateRunning    = "running"
	StateStopped    = "stopped"
	StateExited     = "exited"
	// StateGDBExited is written by the bridge as its last word: gdb itself
	// is gone, so nothing else in the file is current.
	StateGDBExited = "gdb-exited"
)

// Frame is one stack frame.
type Frame struct {
	Level    int    `json:"level"`
	Addr     string `json:"addr,omitempty"`
	Func     string `json:"func,omitempty"`
	File     string `json:"file,omitempty"`
	Fullname string `json:"fullname,omitempty"`
	Line     int    `json:"line,omitempty"`
}

// frameFrom reads an MI frame tuple.
func frameFrom(v Value) *Frame {
	if v.Kind != ValueTuple {
		return nil
	}
	f := &Frame{Addr: v.Str("addr"), Func: v.Str("func"), File: v.Str("file"), Fullname: v.Str("fullname")}
	f.Level, _ = strconv.Atoi(v.Str("level"))
	f.Line, _ = strconv.Atoi(v.Str("line"))
	return f
}

// SyncState is the content of gdb-sync.json, written atomically by the
// bridge after every change.
type SyncState struct {
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Frame      *Frame    `json:"frame,omitempty"`
	ThreadID   string    `json:"thread_id,omitempty"`
	Breakpoint int       `json:"breakpoint,omitempty"`
	Seq        uint64    `json:"seq"`
	Updated    time.Time `json:"updated"`
	GDBPid     int       `json:"gdb_pid"`
}

// ReadSync reads dir/gdb-sync.json (no symlinks, at most 1 MiB).
func ReadSync(dir string) (SyncState, error) {
	var s SyncState
	err := sockets.ReadJSON(dir, sockets.GDBSync, &s)
	return s, err
}

// exitCode decodes gdb's exit-code field, which gdb prints in octal
// ("011" is 9).
func exitCode(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 8, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// stopInfo is what a *stopped record says.
type stopInfo struct {
	exited     bool
	reason     string
	signal     string
	exitCode   *int
	frame      *Frame
	threadID   string
	breakpoint int
}

func parseStopped(r Record) stopInfo {
	si := stopInfo{reason: r.Str("reason"), signal: r.Str("signal-name"), threadID: r.Str("thread-id")}
	if strings.HasPrefix(si.reason, "exited") {
		si.exited = true
		switch si.reason {
		case "exited-normally":
			z := 0
			si.exitCode = &z
		case "exited":
			if c, ok := exitCode(r.Str("exit-code")); ok {
				si.exitCode = &c
			}
		}
		return si
	}
	if f, ok := r.Get("frame"); ok {
		si.frame = frameFrom(f)
	}
	si.breakpoint, _ = strconv.Atoi(r.Str("bkptno"))
	return si
}
