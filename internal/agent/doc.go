// Package agent runs AI agent CLIs (Codex, Claude Code, Gemini CLI, or any
// command) next to a student's session: the agent process runs on the host
// (where the CLI, its credentials and the network are), reaches the session
// only through a stem-mcp server fixed to one instance and one access level,
// and its terminal appears in a new window of the student's tmux through a
// relay (see package ptyproto), or in the caller's terminal with --here.
//
// It launches and supervises; which CLIs exist and how each one is started
// is package agentcli's catalogue, and the record of running agents is
// package agentstore's.
package agent
