// Package hostterm is the host side of `stemctl attach`: the relay between
// the student's real terminal and the tmux client that runs in the
// container.
//
// Everything that comes out of the container is hostile: its tmux server,
// the tmux client binary that stem runs there, and every program in a pane
// can write any byte. A terminal does more than draw: it writes the
// clipboard (OSC 52), forwards passthrough strings to the outer terminal
// (DCS tmux;), shows images, and answers queries by typing text back on
// the keyboard — text that would then reach the container as if the
// student had typed it. Guard passes on only what a terminal needs to draw
// tmux (see guard.go and docs/security.md for the exact list) and re-emits
// every kept sequence whole, so the terminal's parser reads exactly what
// Guard's parser read.
//
// The relay also owns the student's keyboard: it reserves the terminal's
// last row for a line the container cannot write (the host line: pending
// questions of the instance's decision spool, else the instance name) and
// answers a question only from a deliberate key chord typed on the real
// terminal (Keys). A process in the container — another tmux client, a
// script typing into a pane — cannot produce input on the host terminal,
// so it cannot answer.
package hostterm
