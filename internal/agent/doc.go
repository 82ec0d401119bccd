// Package agent launches AI agent CLIs (Codex, Claude Code, Gemini CLI, or
// any command) next to a student's session: it is what `stemctl agent
// start`, `attach` and `stop` run. An agent reaches the session only
// through a stem-mcp server fixed to one instance and one access level.
// In a window, its CLI runs in a sandbox container of its own, under a
// supervisor process (`stemctl agent run`, package supervisor) whose
// terminal appears in a new window of the student's tmux through a relay
// (package ptyproto); with --here, it runs on the host in the caller's
// terminal.
//
// The launcher checks the request (provider, program, sign-in, the task's
// policy), writes the agent's directory (context, MCP configuration, the
// adapter's files, the sandbox's specification), starts the supervisor and
// waits for its readiness lines, opens the window, and stops an agent
// (supervisor, window, sandbox, directory). What it hands the supervisor
// and hears back is package runspec; it does not link the supervisor.
// Which CLIs exist and how each one is started is package agentcli's
// catalogue, and the record of running agents is package agentstore's.
//
// The end-to-end tests here (e2e_*_test.go) drive the built stemctl and
// stem-mcp with real agent CLIs in Podman sandboxes: launcher, supervisor
// and relay together.
package agent
