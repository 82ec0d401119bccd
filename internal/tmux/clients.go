package tmux

import (
	"context"
	"fmt"
	"strconv"
)

// ClientInfo is one client attached to the server: a student's terminal, a
// teacher's, or another tool's control-mode connection.
type ClientInfo struct {
	Name        string `json:"name"`
	TTY         string `json:"tty"`
	PID         int    `json:"pid"`
	Session     string `json:"session"`
	ControlMode bool   `json:"control_mode"`
	ReadOnly    bool   `json:"read_only"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	// Self: this Client's own control connection.
	Self bool `json:"self,omitempty"`
}

var clientFields = []string{"client_name", "client_tty", "client_pid", "client_session", "client_control_mode", "client_readonly", "client_width", "client_height"}

// ListClients lists the clients attached to the server.
func (c *Client) ListClients(ctx context.Context) ([]ClientInfo, error) {
	recs, err := c.framed(ctx, func(f string) string { return "list-clients -F " + f }, clientFields)
	if err != nil {
		return nil, fmt.Errorf("tmux: list-clients: %w", err)
	}
	self := c.clientPID()
	out := make([]ClientInfo, 0, len(recs))
	for _, r := range recs {
		pid, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[6])
		h, _ := strconv.Atoi(r[7])
		out = append(out, ClientInfo{Name: r[0], TTY: r[1], PID: pid, Session: r[3], ControlMode: r[4] == "1",
			ReadOnly: r[5] == "1", Width: w, Height: h, Self: self != 0 && pid == self})
	}
	return out, nil
}

// clientPID is the pid of our own tmux client process (0 if unknown). When
// the client runs through a prefix such as podman exec, the pid tmux sees
// is a different one and Self stays false.
func (c *Client) clientPID() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}
