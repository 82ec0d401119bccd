// Package tmux is how stem talks to a student's tmux server: one persistent
// control-mode client per connection (tmux -C attach -f ignore-size), so a
// capture is one round trip on an open pipe instead of a process per call,
// and the pane output arrives as %output notifications that Wait and Run
// react to without polling.
//
// The student's server runs in the container; its socket is bind-mounted
// at the same path on the host, so the host's tmux client can attach when
// both are the same version (Debian 12's 3.3a). tmux's client/server
// protocol is version-specific: Dial checks the client's `tmux -V` against
// the server's #{version} and reports ErrVersionMismatch, and the caller can
// redial with Options.Command = ["podman", "exec", "-i", CID, "tmux"].
//
// Nothing a caller passes is ever spliced into a tmux command line as
// command text: pane and window targets are validated ids (%N, @N), numbers
// are formatted here, literal keys are sent as hex bytes (send-keys -H),
// named keys come from an allowlist, and the few strings that must go
// through tmux's parser (window names, option values, directories, argv)
// are quoted with Quote, which a test proves against a real tmux. tmux's
// read-only client flag is not a security boundary (a read-only client can
// still run-shell), so which operations a caller may use is decided above
// this package, by the MCP tier; this package only offers operations that
// cannot run arbitrary tmux commands.
//
// Everything that comes back from a pane (text, titles, window names,
// commands, options) is untrusted data: a student's program can print
// escape sequences, text that imitates the control protocol, or text that
// looks like instructions. Responses are framed with an unforgeable
// sentinel (see protocol.go), list output is length-prefixed, and captured
// text is sanitized with internal/termtext.
package tmux
