package tmux

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Pane describes one pane. String fields other than the ids are
// student-controlled (titles are set by any program with an escape
// sequence, names and options with tmux commands) and must be treated as
// untrusted text.
type Pane struct {
	ID           PaneID   `json:"id"`
	SessionID    string   `json:"session_id"`
	SessionName  string   `json:"session_name"`
	WindowID     WindowID `json:"window_id"`
	WindowIndex  int      `json:"window_index"`
	WindowName   string   `json:"window_name"`
	WindowActive bool     `json:"window_active"`
	Index        int      `json:"index"`
	Title        string   `json:"title"`
	Command      string   `json:"command"` // pane_current_command
	PID          int      `json:"pid"`
	Width        int      `json:"width"`
	Height       int      `json:"height"`
	Active       bool     `json:"active"` // the active pane of its window
	Dead         bool     `json:"dead"`
	DeadStatus   int      `json:"dead_status"` // exit status of a dead pane, -1 if none
	InMode       bool     `json:"in_mode"`     // copy or view mode
	Synchronized bool     `json:"synchronized"`
	HistorySize  int      `json:"history_size"`
	CursorX      int      `json:"cursor_x"`
	CursorY      int      `json:"cursor_y"`
	TTY          string   `json:"tty"`
	// Allow is the pane user option @stem_allow. Anything in the
	// container can set it, so it opens nothing: stem-mcp replaces it
	// with the student's host record (internal/consent) before showing it.
	Allow string `json:"stem_allow"`
	// Role is the pane user option @stem_role (e.g. "shell", "gdb").
	Role string `json:"stem_role"`
}

// Allowed reports whether @stem_allow holds a true value (1, on, yes, true).
func (p Pane) Allowed() bool {
	switch strings.ToLower(p.Allow) {
	case "1", "on", "yes", "true":
		return true
	}
	return false
}

// paneFields are the format variables ListPanes reads, in order.
var paneFields = []string{
	"pane_id", "session_id", "session_name", "window_id", "window_index", "window_name",
	"window_active", "pane_index", "pane_title", "pane_current_command", "pane_pid",
	"pane_width", "pane_height", "pane_active", "pane_dead", "pane_dead_status",
	"pane_in_mode", "synchronize-panes", "history_size", "cursor_x", "cursor_y", "pane_tty",
	"@stem_allow", "@stem_role",
}

// framedFormat builds a format in which every value is written as
// LENGTH:VALUE (#{n:X} is the byte length of X). Values may hold any byte,
// including newlines and our separators, without being able to spoof
// another field or record.
func framedFormat(fields []string) string {
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "#{n:%s}:#{%s}", f, f)
	}
	return b.String()
}

// errFraming marks output whose lengths did not add up; tmux computes a
// value twice (#{n:X} and #{X}), and pane_current_command is read from /proc
// each time, so a program that execs in between can cause it. Retried.
var errFraming = errors.New("framed output does not add up")

// parseFramed parses records of len(fields) framed values, each record
// ending in a newline (tmux prints one line per item; the newline after the
// last record is not part of the block text).
func parseFramed(s string, nfields int) ([][]string, error) {
	var recs [][]string
	for len(s) > 0 {
		rec := make([]string, nfields)
		for i := range rec {
			colon := strings.IndexByte(s, ':')
			if colon <= 0 || colon > 10 {
				return nil, errFraming
			}
			n, err := strconv.Atoi(s[:colon])
			if err != nil || n < 0 || n > len(s)-colon-1 {
				return nil, errFraming
			}
			rec[i] = s[colon+1 : colon+1+n]
			s = s[colon+1+n:]
		}
		recs = append(recs, rec)
		if len(s) > 0 {
			if s[0] != '\n' {
				return nil, errFraming
			}
			s = s[1:]
		}
	}
	return recs, nil
}

// framed runs a command whose -F format is framedFormat(fields) and parses
// its output, retrying a few times on a framing race.
func (c *Client) framed(ctx context.Context, build func(format string) string, fields []string) ([][]string, error) {
	format := mustQuote(framedFormat(fields))
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var out string
		out, err = c.command(ctx, build(format))
		if err != nil {
			return nil, err
		}
		var recs [][]string
		recs, err = parseFramed(out, len(fields))
		if err == nil {
			return recs, nil
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
}

// ListPanes lists every pane on the server.
func (c *Client) ListPanes(ctx context.Context) ([]Pane, error) {
	recs, err := c.framed(ctx, func(f string) string { return "list-panes -a -F " + f }, paneFields)
	if err != nil {
		return nil, fmt.Errorf("tmux: list-panes: %w", err)
	}
	panes := make([]Pane, 0, len(recs))
	for _, r := range recs {
		p, err := paneFromRecord(r)
		if err != nil {
			return nil, err
		}
		panes = append(panes, p)
	}
	return panes, nil
}

// PaneInfo describes one pane.
func (c *Client) PaneInfo(ctx context.Context, pane PaneID) (Pane, error) {
	if err := pane.check(); err != nil {
		return Pane{}, err
	}
	recs, err := c.framed(ctx, func(f string) string {
		return "display-message -p -t " + string(pane) + " " + f
	}, paneFields)
	if err != nil {
		return Pane{}, fmt.Errorf("tmux: pane %s: %w", pane, err)
	}
	// display-message does not fail for a missing target pane (its
	// formats come out empty, or from another pane in some versions):
	// never report anything but the pane asked for.
	if len(recs) != 1 || recs[0][0] != string(pane) {
		return Pane{}, fmt.Errorf("%w: %s", ErrNoPane, pane)
	}
	return paneFromRecord(recs[0])
}

func paneFromRecord(r []string) (Pane, error) {
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0
		}
		return n
	}
	id, err := ParsePaneID(r[0])
	if err != nil {
		return Pane{}, fmt.Errorf("%w: pane id %q in list-panes", ErrProtocol, r[0])
	}
	p := Pane{
		ID:           id,
		SessionID:    r[1],
		SessionName:  r[2],
		WindowID:     WindowID(r[3]),
		WindowIndex:  num(r[4]),
		WindowName:   r[5],
		WindowActive: r[6] == "1",
		Index:        num(r[7]),
		Title:        r[8],
		Command:      r[9],
		PID:          num(r[10]),
		Width:        num(r[11]),
		Height:       num(r[12]),
		Active:       r[13] == "1",
		Dead:         r[14] == "1",
		DeadStatus:   -1,
		InMode:       r[16] == "1",
		Synchronized: r[17] == "1",
		HistorySize:  num(r[18]),
		CursorX:      num(r[19]),
		CursorY:      num(r[20]),
		TTY:          r[21],
		Allow:        r[22],
		Role:         r[23],
	}
	if p.Dead && r[15] != "" {
		p.DeadStatus = num(r[15])
	}
	return p, nil
}

// DisplayFormat returns the value of one format variable for a pane, as
// `display-message -p` would print #{variable}. variable is a tmux format
// variable name (e.g. "pane_current_path") or a user option ("@stem_role");
// no modifiers, so no #() or other expansion is possible.
func (c *Client) DisplayFormat(ctx context.Context, pane PaneID, variable string) (string, error) {
	if err := pane.check(); err != nil {
		return "", err
	}
	if !validFormatVar(variable) {
		return "", fmt.Errorf("%w: format variable %q", ErrInvalidArgument, variable)
	}
	recs, err := c.framed(ctx, func(f string) string {
		return "display-message -p -t " + string(pane) + " " + f
	}, []string{"pane_id", variable})
	if err != nil {
		return "", fmt.Errorf("tmux: display %s for %s: %w", variable, pane, err)
	}
	if len(recs) != 1 || recs[0][0] != string(pane) {
		return "", fmt.Errorf("%w: %s", ErrNoPane, pane)
	}
	return recs[0][1], nil
}

// Version returns the server's tmux version ("3.3a"), asked afresh.
func (c *Client) Version(ctx context.Context) (string, error) {
	out, err := c.command(ctx, "display-message -p "+mustQuote("#{version}"))
	if err != nil {
		return "", fmt.Errorf("tmux: version: %w", err)
	}
	return out, nil
}

// paneState is the part of a pane's state the key and run paths check.
type paneState struct {
	dead, inMode, sync bool
	session            string
	command            string
	keys               markKeys // the shells' mark keys (@stem_keys)
}

func (c *Client) paneState(ctx context.Context, pane PaneID) (paneState, error) {
	recs, err := c.framed(ctx, func(f string) string {
		return "display-message -p -t " + string(pane) + " " + f
	}, []string{"pane_id", "pane_dead", "pane_in_mode", "synchronize-panes", "session_id", "pane_current_command", "@stem_keys"})
	if err != nil {
		return paneState{}, fmt.Errorf("tmux: pane %s: %w", pane, err)
	}
	if len(recs) != 1 || recs[0][0] != string(pane) {
		return paneState{}, fmt.Errorf("%w: %s", ErrNoPane, pane)
	}
	r := recs[0]
	return paneState{dead: r[1] == "1", inMode: r[2] == "1", sync: r[3] == "1", session: r[4], command: r[5], keys: parseMarkKeys(r[6])}, nil
}
