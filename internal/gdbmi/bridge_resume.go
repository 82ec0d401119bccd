package gdbmi

import "fmt"

// A resume can end without a *stopped record. gdb answers -exec-continue
// with ^running before it has inserted breakpoints and resumed the threads;
// when that later fails (a Ctrl-C in the pane sets gdb's quit flag, or a
// breakpoint cannot be written into the target), gdb sends a second result
// with the same token, ^error, and leaves the program stopped without
// telling any MI UI. The bridge notices the second result, and also checks
// after the -exec-interrupt it sends for a Ctrl-C, by asking gdb for its
// threads: when none runs but the state says running, it reports the stop
// itself, so clients that saw *running are not left waiting.

// onResumeAborted handles the second result, an error, for a resume gdb
// already answered with ^running.
func (b *bridge) onResumeAborted(rec Record) {
	b.logf("gdb aborted resuming the program: %s", rec.Str("msg"))
	b.mu.Lock()
	b.abortMsg = rec.Str("msg")
	b.mu.Unlock()
	b.checkStillRunning()
}

// checkStillRunning asks gdb whether any thread runs; reconcileRunning
// handles the answer on the reader goroutine.
func (b *bridge) checkStillRunning() {
	b.goSubmit(pend{op: "-thread-info", onResult: b.reconcileRunning}, "-thread-info")
}

// reconcileRunning runs on the goroutine that reads gdb's output, so every
// *stopped gdb printed before this answer has already been handled: if the
// state still says running while gdb says no thread runs, the stop was
// never announced.
func (b *bridge) reconcileRunning(rec Record) {
	if rec.Class != "done" {
		return
	}
	threads, _ := rec.Get("threads")
	if len(threads.Elems()) == 0 {
		return
	}
	var frame Value
	cur := rec.Str("current-thread-id")
	for _, t := range threads.Elems() {
		if t.Str("state") != "stopped" {
			return
		}
		if f, ok := t.Get("frame"); ok && (frame.Kind == 0 || t.Str("id") == cur) {
			frame = f
		}
	}
	b.mu.Lock()
	running := b.state.State == StateRunning
	who, msg := b.resumedBy, b.abortMsg
	if !b.runningFromMI {
		who = ""
	}
	b.abortMsg = ""
	b.mu.Unlock()
	if !running {
		return
	}
	stop := Record{Kind: KindExec, Class: "stopped"}
	if frame.Kind == ValueTuple {
		var fs []Field
		for _, f := range frame.Fields {
			if f.Name != "level" { // a *stopped frame has no level
				fs = append(fs, f)
			}
		}
		stop.Results = append(stop.Results, Field{Name: "frame", Value: Value{Kind: ValueTuple, Fields: fs}})
	}
	if cur != "" {
		stop.Results = append(stop.Results, Field{Name: "thread-id", Value: Value{Kind: ValueConst, Const: cur}})
	}
	stop.Results = append(stop.Results, Field{Name: "stopped-threads", Value: Value{Kind: ValueConst, Const: "all"}})
	b.logf("gdb stopped the program without announcing it; telling the clients")
	b.updateSync(stop)
	b.broadcast(Format(stop))
	if b.opt.Quiet {
		return
	}
	if who == "" {
		who = "a client"
	}
	note := fmt.Sprintf("\r\n[%s resumed the program, but gdb stopped it before it ran", who)
	if msg != "" {
		note += ": " + msg
	}
	note += "]\r\n"
	select {
	case b.paneNotes <- note:
	default:
	}
}
