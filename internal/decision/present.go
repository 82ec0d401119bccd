package decision

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/procstat"
)

// Watcher is a host input showing this instance's questions now: a
// `stemctl attach` (its host line) or `stemctl approvals --watch`.
type Watcher struct {
	PID   int       `json:"pid"`
	Start uint64    `json:"start"` // the process's start time, so a reused pid is not taken for it
	Input string    `json:"input"` // "host terminal /dev/pts/3 (stemctl attach)"
	Since time.Time `json:"since"`
}

// Attend records this process as a Watcher until release is called (or
// the process ends: a dead watcher's file is ignored and removed).
func (s *Spool) Attend(input string) (release func(), err error) {
	pid := os.Getpid()
	start, err := procstat.Start(pid)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	data, err := json.Marshal(Watcher{PID: pid, Start: start, Input: input, Since: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.dir, "w-"+strconv.Itoa(pid)+".json")
	if err := writeAtomic(s.dir, path, data); err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	return func() { os.Remove(path) }, nil
}

// Present is the live watchers. Files of processes that have ended are
// removed.
func (s *Spool) Present() []Watcher {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	var ws []Watcher
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "w-") || !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(s.dir, name)
		data, err := readBounded(path)
		if err != nil {
			continue
		}
		var w Watcher
		if json.Unmarshal(data, &w) != nil || name != "w-"+strconv.Itoa(w.PID)+".json" {
			continue
		}
		if !procstat.Same(w.PID, w.Start) {
			os.Remove(path)
			continue
		}
		ws = append(ws, w)
	}
	return ws
}
