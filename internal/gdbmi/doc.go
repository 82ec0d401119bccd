// Package gdbmi lets agents see and drive the very gdb a student is using.
//
// The student's tmux pane runs RunBridge (stem-mcp gdb-bridge), which starts
// gdb with a second, machine UI (`new-ui mi3` on a private pty) and serves
// that GDB/MI channel on the container's g.sock; the console stays the
// student's. Client (Dial) speaks to g.sock from the host. Commands are built
// only by typed constructors whose free-form inputs pass ParseLocation or
// ParseSafeExpr, so assist-level agents cannot reach gdb's ways of running
// code (conditions, calls, $_shell, assignments); Console is the one raw
// escape and belongs to the full level.
//
// The student's editor is one more client, inside the container (the
// Neovim plugin in containers/files/nvim): it shows the frame and the
// breakpoints and sends its own MI commands.
//
// Several clients and the student share one gdb and may all act at once;
// nothing arbitrates between them.
package gdbmi
