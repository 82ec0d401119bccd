package gdbmi

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"time"
)

// The MI channel: commands to gdb under the bridge's tokens, and gdb's
// output routed to the client that asked or to every client.

// submit writes a command to gdb under a bridge-unique token. Registration
// and the write happen under writeMu so the inflight order is the order gdb
// reads commands in. It may block on gdb, so it must never run on the
// goroutine that reads gdb's output.
func (b *bridge) submit(p pend, cmd string) {
	c, tok := p.c, p.tok
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	b.nextTok++
	bt := strconv.FormatUint(b.nextTok, 10)
	b.pending[bt] = p
	b.inflight = append(b.inflight, bt)
	b.mu.Unlock()
	_ = b.master.SetWriteDeadline(time.Now().Add(gdbWriteTimeout))
	if _, err := io.WriteString(b.master, bt+cmd+"\n"); err != nil {
		b.mu.Lock()
		delete(b.pending, bt)
		b.dropInflight(bt)
		b.mu.Unlock()
		b.logf("write to gdb: %v", err)
		if c != nil {
			c.send(tok + "^error,msg=" + Quote("bridge: gdb is not reading commands: "+err.Error()))
		}
	}
}

// goSubmit sends one of the bridge's own commands without blocking the
// caller.
func (b *bridge) goSubmit(p pend, cmd string) {
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.submit(p, cmd)
	}()
}

// dropInflight removes bt and returns the entries sent before it, which gdb
// can no longer answer. Caller holds b.mu.
func (b *bridge) dropInflight(bt string) []pend {
	for i, t := range b.inflight {
		if t != bt {
			continue
		}
		var stale []pend
		for _, s := range b.inflight[:i] {
			if p, ok := b.pending[s]; ok {
				stale = append(stale, p)
				delete(b.pending, s)
			}
		}
		b.inflight = append(b.inflight[:0:0], b.inflight[i+1:]...)
		return stale
	}
	return nil
}

// readMI reads gdb's MI output until the pty closes; ready is closed at the
// first line, which shows the MI UI exists.
func (b *bridge) readMI(ready chan<- struct{}) {
	br := bufio.NewReaderSize(b.master, 64<<10)
	first := true
	for {
		line, err := readLine(br, maxMILine)
		if errors.Is(err, errLineTooLong) {
			b.logf("dropped an MI line longer than %d bytes", maxMILine)
			continue
		}
		if err != nil {
			return
		}
		if first {
			first = false
			close(ready)
		}
		b.handleMI(line)
	}
}

func (b *bridge) handleMI(line string) {
	rec, err := Parse(line)
	if err != nil {
		b.logf("unparsable MI output from gdb: %v", err)
		return
	}
	if rec.Kind != KindResult && rec.Token != "" {
		// A bridge token means nothing to clients.
		line = line[len(rec.Token):]
		rec.Token = ""
	}
	switch rec.Kind {
	case KindPrompt:
	case KindResult:
		if rec.Token == "" {
			// A console command's result (the student typed run/continue).
			if rec.Class == "running" {
				b.mu.Lock()
				b.runningFromMI = false
				b.mu.Unlock()
			}
			b.broadcast(line)
			return
		}
		b.mu.Lock()
		p, ok := b.pending[rec.Token]
		delete(b.pending, rec.Token)
		stale := b.dropInflight(rec.Token)
		aborted := !ok && rec.Class == "error" && rec.Token == b.resumeTok
		if ok && rec.Class == "running" {
			b.resumeTok = rec.Token
			b.runningFromMI = true
			b.resumedBy = "agent"
			if p.c != nil && p.c.name != "" {
				b.resumedBy = p.c.name
			}
		}
		b.mu.Unlock()
		for _, s := range stale {
			if s.c != nil {
				s.c.send(s.tok + "^error,msg=" + Quote("bridge: gdb did not answer this command"))
			}
		}
		if aborted {
			b.onResumeAborted(rec)
		}
		if ok && p.c != nil {
			p.c.send(p.tok + line[len(rec.Token):])
		}
		if ok && p.onResult != nil {
			p.onResult(rec)
		}
		if ok && rec.Class == "done" {
			b.afterSelect(p.op, rec)
			b.afterBreak(p, rec)
		}
	case KindConsole, KindLog:
		b.toOwner(line)
	case KindNotify:
		// Setting changes made by a command (including the temporary
		// ones of `with`) are that command's business.
		if rec.Class == "cmd-param-changed" {
			b.toOwner(line)
			return
		}
		fallthrough
	default:
		stopped := rec.Kind == KindExec && rec.Class == "stopped"
		who := ""
		if stopped {
			b.mu.Lock()
			if b.runningFromMI {
				who = b.resumedBy
			}
			b.mu.Unlock()
		}
		// The state first (in memory; the file is written in the
		// background): a client that saw the event may act on it at
		// once, a Ctrl-C in the pane for one (onInterrupt reads it).
		b.updateSync(rec)
		b.broadcast(line)
		if stopped && !b.opt.Quiet {
			if n := paneNote(rec, who); n != "" {
				select {
				case b.paneNotes <- n:
				default:
				}
			}
		}
	}
}

// toOwner sends a line produced while a command is being answered to the
// client that sent it (dropping it for the bridge's own commands), and any
// other line to every client.
func (b *bridge) toOwner(line string) {
	b.mu.Lock()
	var owner pend
	owned := len(b.inflight) > 0
	if owned {
		owner = b.pending[b.inflight[0]]
	}
	b.mu.Unlock()
	if !owned {
		b.broadcast(line)
	} else if owner.c != nil {
		owner.c.send(owner.tok + line)
	}
}

// onInterrupt handles the Ctrl-C the bridge receives along with gdb. When
// the program was resumed by an MI command, gdb keeps the terminal and
// answers Ctrl-C at its prompt with "Quit" without stopping the program, so
// the bridge interrupts it for the student. When the student resumed it,
// gdb handles Ctrl-C itself and the bridge does nothing.
func (b *bridge) onInterrupt() {
	b.mu.Lock()
	do := b.state.State == StateRunning && b.runningFromMI
	b.mu.Unlock()
	if do {
		b.logf("Ctrl-C while an MI command had resumed the program: interrupting it")
		// A Ctrl-C that lands while gdb is still resuming aborts the
		// resume instead; the check after the answer catches that.
		b.goSubmit(pend{op: "-exec-interrupt", onResult: func(Record) { b.checkStillRunning() }}, "-exec-interrupt")
	}
}
