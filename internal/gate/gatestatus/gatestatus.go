// Package gatestatus is the JSON the gate's `status` verb prints: a
// contract between the student's gate and the teacher's stemctl, kept
// apart so stemctl decodes it without linking the gate and the MCP server.
package gatestatus

import "time"

// Status is the JSON the `status` verb prints.
type Status struct {
	Account   string           `json:"account"`
	Grant     string           `json:"grant"`
	Level     string           `json:"level"`
	Expires   *time.Time       `json:"expires,omitempty"`
	Instances []InstanceStatus `json:"instances"`
	// Session describes this SSH session as sshd set it up; with a
	// `restrict` key both are false.
	Session SessionInfo `json:"session"`
}

// SessionInfo reports what sshd granted this session.
type SessionInfo struct {
	TTY            bool `json:"tty"`
	AgentForwarded bool `json:"agent_forwarded"`
}

// InstanceStatus is one allowed instance.
type InstanceStatus struct {
	Instance    string `json:"instance"`
	Registered  bool   `json:"registered"`
	ContainerID string `json:"container_id,omitempty"`
	Profile     string `json:"profile,omitempty"`
	Series      string `json:"series,omitempty"`
	Card        string `json:"card,omitempty"`
	Task        string `json:"task,omitempty"`
	Target      string `json:"target,omitempty"`
	Tmux        bool   `json:"tmux"`
	Nvim        bool   `json:"nvim"`
	Answers     bool   `json:"answers"` // both servers answer
	Error       string `json:"error,omitempty"`
}
