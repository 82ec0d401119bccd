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
	// Activity is the last output in the student's tmux or key from their
	// terminal (absent when tmux does not answer); a claim of the
	// container's server.
	Activity *time.Time `json:"activity,omitempty"`
	// Agents are the agents `stemctl agent start` runs in this instance.
	Agents []Agent `json:"agents,omitempty"`
}

// Agent is one agent in an instance's session.
type Agent struct {
	Provider string    `json:"provider"`
	Level    string    `json:"level"`
	Started  time.Time `json:"started"`
	// Problem says why an agent is not working normally (ending, its
	// process gone).
	Problem string `json:"problem,omitempty"`
}
