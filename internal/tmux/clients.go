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
	selfName, selfPID := c.self()
	out := make([]ClientInfo, 0, len(recs))
	for _, r := range recs {
		pid, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[6])
		h, _ := strconv.Atoi(r[7])
		out = append(out, ClientInfo{Name: r[0], TTY: r[1], PID: pid, Session: r[3], ControlMode: r[4] == "1",
			ReadOnly: r[5] == "1", Width: w, Height: h, Self: (selfName != "" && r[0] == selfName) || (selfPID != 0 && pid == selfPID)})
	}
	return out, nil
}

// self is how the server knows our client: the Go client by its name, a
// client program by its pid. When the program runs through a prefix such
// as podman exec, the pid tmux sees is a different one and Self stays
// false.
func (c *Client) self() (name string, pid int) {
	switch p := c.peer.(type) {
	case wirePeer:
		return p.name, 0
	case procPeer:
		if p.cmd.Process != nil {
			return "", p.cmd.Process.Pid
		}
	}
	return "", 0
}
