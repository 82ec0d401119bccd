package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"
)

// Filter selects entries for Show. Zero fields match everything.
type Filter struct {
	Instance string
	Level    string
	Event    string
	Account  string
	Agent    string
	Since    time.Time
	Until    time.Time
	// Unfinished keeps only intents with no outcome in the log.
	Unfinished bool
	Limit      int // keep the last Limit matches
}

func (f Filter) match(e Entry) bool {
	switch {
	case f.Unfinished && e.Event != ToolIntent:
		return false
	case f.Instance != "" && e.Instance != f.Instance,
		f.Level != "" && e.Level != f.Level,
		f.Event != "" && e.Event != f.Event,
		f.Account != "" && e.Account != f.Account,
		f.Agent != "" && e.Agent != f.Agent,
		!f.Since.IsZero() && e.Time.Before(f.Since),
		!f.Until.IsZero() && e.Time.After(f.Until):
		return false
	}
	return true
}

// Read returns the entries matching f, oldest first. Unparseable lines are
// skipped (Verify reports them).
func (l *Log) Read(f Filter) ([]Entry, error) {
	fh, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer fh.Close()
	lr := newLineReader(fh)
	var out []Entry
	closed := map[int64]bool{}
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Intent != 0 {
			closed[e.Intent] = true
		}
		if f.match(e) {
			out = append(out, e)
		}
	}
	if f.Unfinished {
		out = slices.DeleteFunc(out, func(e Entry) bool { return closed[e.Seq] })
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, nil
}

// UnfinishedSeqs returns the Seq of every intent in the log that has no
// outcome (see ToolIntent).
func (l *Log) UnfinishedSeqs() (map[int64]bool, error) {
	es, err := l.Read(Filter{Unfinished: true})
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(es))
	for _, e := range es {
		out[e.Seq] = true
	}
	return out, nil
}
