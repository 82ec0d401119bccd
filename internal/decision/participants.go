package decision

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/procstat"
)

// Participant is a client connected to the instance's session now: an
// agent stem started, a teacher's gate, a local MCP client. Each stem-mcp
// server joins while it serves the instance, so the student's host line
// shows who is there — from files the container cannot reach, so it can
// neither hide nor fake one.
type Participant struct {
	PID   int       `json:"pid"`
	Start uint64    `json:"start"`
	Who   string    `json:"who"`   // "agent 3f9a2c", "teacher kowalska", "an MCP client"
	Level string    `json:"level"` // observe, assist, full
	Since time.Time `json:"since"`
}

// Join records this process as a participant until leave is called (or
// the process ends).
func (s *Spool) Join(who, level string) (leave func(), err error) {
	pid := os.Getpid()
	start, err := procstat.Start(pid)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	data, err := json.Marshal(Participant{PID: pid, Start: start, Who: who, Level: level, Since: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, "p-"+strconv.Itoa(pid)+"-"+NewID()[:8]+".json")
	if err := writeAtomic(s.dir, path, data); err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	return func() { os.Remove(path) }, nil
}

// Participants is who is connected now, longest first. Files of
// processes that have ended are removed.
func (s *Spool) Participants() []Participant {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	var ps []Participant
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "p-") || !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(s.dir, name)
		data, err := readBounded(path)
		if err != nil {
			continue
		}
		var p Participant
		if json.Unmarshal(data, &p) != nil || !strings.HasPrefix(name, "p-"+strconv.Itoa(p.PID)+"-") {
			continue
		}
		if !procstat.Same(p.PID, p.Start) {
			os.Remove(path)
			continue
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Participant) int { return a.Since.Compare(b.Since) })
	return ps
}
