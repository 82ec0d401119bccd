package class

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/lib/evring"
)

const (
	// minPerStudent is the fewest events kept for each student, however
	// large the class.
	minPerStudent = 32
	// MaxPageEvents and MaxPageBytes bound one page of class events.
	MaxPageEvents = 256
	MaxPageBytes  = 256 << 10
	// maxGDBKeys bounds the fields kept of one gdb stop.
	maxGDBKeys = 16
)

var gdbKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// flatGDB keeps a gdb stop's scalar fields (reason, func, file, line, ...)
// as clean strings; nested parts are dropped, and so is a key that is no
// gdb field name or that could pass for the event's own attribution
// (student...).
func flatGDB(raw json.RawMessage) map[string]string {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if gdbKeyRE.MatchString(k) && !strings.HasPrefix(k, "student") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		if len(out) == maxGDBKeys {
			break
		}
		switch v := m[k].(type) {
		case string:
			out[k] = clean(v)
		case float64, bool:
			out[k] = fmt.Sprint(v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// knownTool is whether a tool name a gate offers is one the class may
// forward.
func (h *Hub) knownTool(name string) bool {
	if name == gateStatusTool || name == "session_events" {
		return true
	}
	if h.opt.Tools == nil {
		return toolNameRE.MatchString(name)
	}
	return slices.Contains(h.opt.Tools, name)
}

var toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// Page is one page of the class's events.
type Page struct {
	Events []Event `json:"events"`
	// Next is the seq to pass as since for the following page (the last
	// event's, or since itself when there is none).
	Next int64 `json:"next"`
	// More says that events after Next are kept already: ask again at
	// once.
	More bool `json:"more"`
	// Dropped counts, by student, the events the hub no longer keeps
	// (only students with any).
	Dropped map[string]int64 `json:"dropped,omitempty"`
}

// Page returns the events after seq, oldest first, at most MaxPageEvents
// of them and about MaxPageBytes of JSON, waiting up to wait for the
// first.
func (h *Hub) Page(ctx context.Context, seq int64, wait time.Duration) Page {
	return evring.Wait(ctx, &h.changed, wait, func() (Page, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		p := h.pageLocked(seq)
		return p, len(p.Events) > 0
	})
}

func (h *Hub) pageLocked(seq int64) Page {
	p := Page{Events: []Event{}, Next: seq}
	var all []Event
	for name, r := range h.rings {
		if d := r.Dropped(); d > 0 {
			if p.Dropped == nil {
				p.Dropped = map[string]int64{}
			}
			p.Dropped[name] = d
		}
		all = append(all, r.After(seq)...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	size := 0
	for i, e := range all {
		data, _ := json.Marshal(e)
		if i == MaxPageEvents || (i > 0 && size+len(data) > MaxPageBytes) {
			p.More = true
			break
		}
		size += len(data)
		p.Events = append(p.Events, e)
		p.Next = e.Seq
	}
	return p
}

// Since returns the events after seq (one page of them), waiting up to
// wait for the first.
func (h *Hub) Since(ctx context.Context, seq int64, wait time.Duration) []Event {
	p := h.Page(ctx, seq, wait)
	if len(p.Events) == 0 {
		return nil
	}
	return p.Events
}
