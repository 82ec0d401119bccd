// Package supervisor is the runtime of one agent: what the hidden
// `stemctl agent run` runs, detached, for each agent `stemctl agent start`
// opens in a window. It reads the spec the launcher wrote (package
// runspec), starts the agent CLI in its sandbox container (package
// sandbox) or on a pseudo terminal, serves that terminal on the agent's
// socket to the relay in the student's tmux (package ptyproto), serves the
// sandbox its MCP and egress sockets, types session events into the CLI
// when its screen is idle (package cliscreen), records its state for
// `agent list` (package agentstore), and ends the CLI when asked, when its
// window stays closed, or when the instance goes away.
//
// Threat model: the instance's container can write its socket directory
// (where the agent's socket lives) and runs the tmux server whose screen
// is read, and the sandbox runs a CLI that may be steered by what it
// reads. So the agent's socket is made, checked and removed without
// following a symlink (sockets.Dir), the tmux socket is opened through
// unixpin, text from the relay or the screen is sanitized (termtext)
// before it is logged, and what the supervisor serves the sandbox is two
// sockets in a host directory of its own: stem-mcp at the agent's level,
// fixed to its instance, and the egress proxy, which allows only its
// CLI's endpoints (package sandbox confines the rest). The caller's
// credentials reach the CLI from this process's environment when it
// starts and are never written down.
//
// It does not link the launcher (package agent): the two share only
// package runspec.
package supervisor
