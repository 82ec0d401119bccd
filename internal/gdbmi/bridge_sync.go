package gdbmi

import (
	"time"

	"github.com/stem-edu/stem/internal/sockets"
)

func (b *bridge) updateSync(rec Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &b.state
	changed := true
	switch {
	case rec.Kind == KindExec && rec.Class == "running":
		s.State, s.Reason, s.Signal, s.ExitCode, s.Frame, s.Breakpoint = StateRunning, "", "", nil, nil, 0
		if t := rec.Str("thread-id"); t != "" && t != "all" {
			s.ThreadID = t
		}
	case rec.Kind == KindExec && rec.Class == "stopped":
		si := parseStopped(rec)
		s.Reason, s.Signal, s.ExitCode, s.Breakpoint = si.reason, si.signal, si.exitCode, si.breakpoint
		if si.exited {
			s.State, s.Frame = StateExited, nil
		} else {
			s.State, s.Frame = StateStopped, si.frame
			if si.threadID != "" {
				s.ThreadID = si.threadID
			}
		}
		b.runningFromMI = false
	case rec.Kind == KindNotify && rec.Class == "thread-selected":
		// The student (or a client) moved to another frame or thread.
		v, ok := rec.Get("frame")
		if !ok || s.State != StateStopped {
			return
		}
		s.Frame, s.ThreadID = frameFrom(v), rec.Str("id")
	case rec.Kind == KindNotify && rec.Class == "thread-group-exited":
		b.runningFromMI = false
		if s.State == StateExited {
			return
		}
		s.State, s.Reason, s.Signal, s.Frame, s.Breakpoint = StateExited, "", "", nil, 0
		s.ExitCode = nil
		if c, ok := exitCode(rec.Str("exit-code")); ok {
			s.ExitCode = &c
		}
	default:
		changed = false
	}
	if !changed {
		return
	}
	s.Seq++
	s.Updated = time.Now().UTC()
	select {
	case b.syncKick <- struct{}{}:
	default:
	}
}

// syncLoop writes gdb-sync.json whenever the state changed; bursts of
// changes collapse into one write of the latest state.
func (b *bridge) syncLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-b.syncKick:
			b.writeSync()
		}
	}
}

func (b *bridge) writeSync() {
	b.mu.Lock()
	snap := b.state // pointers inside are replaced, never mutated
	b.mu.Unlock()
	if err := sockets.WriteJSON(b.opt.Dir, sockets.GDBSync, snap); err != nil {
		b.logf("%v", err)
	}
}
