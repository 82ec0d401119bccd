package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/class"
)

// Bounds of the student page: everything on it came from the student's
// machine.
const (
	maxPanes      = 8   // panes shown, the active window's first
	paneLines     = 200 // lines kept of each pane
	bufferBytes   = 64 << 10
	bufferLines   = 2000
	maxDiags      = 200
	maxTimeline   = 200
	gdbBytes      = 16 << 10
	studentLookup = 10 * time.Second // the whole page's calls
)

// AuditNote says why the page shows no agents' audit: what agents did is
// in the student's audit log, which no gate tool returns at any level.
const AuditNote = "What agents did in this session is in the student's audit log, and no gate tool returns the audit log at any level, so this page cannot show it: the student sees it with `stemctl audit show`. Shown here: the agents running now, from the gate's status."

// StudentView is the student page: every pane, the Neovim buffer with its
// diagnostics, the debugger, the timeline, the agents, and which actions
// the grant allows.
type StudentView struct {
	Student   string     `json:"student"`
	Connected bool       `json:"connected"`
	Error     string     `json:"error,omitempty"` // why not connected
	Level     string     `json:"level,omitempty"`
	Instance  string     `json:"instance,omitempty"`
	Task      string     `json:"task,omitempty"`
	State     string     `json:"state,omitempty"`
	Flags     []string   `json:"flags"`
	Panes     []PaneView `json:"panes"`
	PaneError string     `json:"pane_error,omitempty"`
	Nvim      NvimView   `json:"nvim"`
	GDB       GDBView    `json:"gdb"`
	Events    []string   `json:"events"` // oldest first
	Agents    []string   `json:"agents"`
	Audit     string     `json:"audit"`
	Actions   Actions    `json:"actions"`
	Millis    int64      `json:"elapsed_ms"`
}

// Actions are what the page offers: only what the grant's tools allow.
type Actions struct {
	Hint bool `json:"hint"` // nvim_hint
	Keys bool `json:"keys"` // pane_send_keys, to panes the student allows
}

// PaneView is one pane.
type PaneView struct {
	ID      string  `json:"id"`
	Label   string  `json:"label"` // window, name, command, title: one line
	Active  bool    `json:"active"`
	Allowed bool    `json:"allowed"` // the student allows keys (stemctl allow, through pane_list)
	Screen  [][]Run `json:"screen"`
	Error   string  `json:"error,omitempty"`
}

// NvimView is the current buffer with its diagnostics.
type NvimView struct {
	Tool        string     `json:"tool,omitempty"` // which tool the grant lacked, if any
	File        string     `json:"file,omitempty"`
	Mode        string     `json:"mode,omitempty"`
	Cursor      int        `json:"cursor,omitempty"`
	Lines       []BufLine  `json:"lines"`
	Truncated   bool       `json:"truncated,omitempty"`
	Diagnostics []DiagView `json:"diagnostics"`
	Error       string     `json:"error,omitempty"`
	Buffers     []string   `json:"buffers"`
}

// BufLine is one numbered line of the buffer, with its worst diagnostic.
type BufLine struct {
	N    int    `json:"n"`
	Text string `json:"t"`
	Diag string `json:"d,omitempty"` // error, warning, info, hint
}

// DiagView is one diagnostic.
type DiagView struct {
	Line     int    `json:"line"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// GDBView is gdb_status, its state and its answer as text.
type GDBView struct {
	State string `json:"state,omitempty"` // "no-debugger", "stopped", "running", ...
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

func (s *Server) studentPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.Students == nil || !s.board.Has(name) {
		http.Error(w, "no such student in this class", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), studentLookup)
	defer cancel()
	v := LookStudent(ctx, s.Students, s.board, name)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// LookStudent gathers the student page over the student's open session:
// each part with the tools the grant has, all at once.
func LookStudent(ctx context.Context, src Source, board *Board, student string) StudentView {
	start := time.Now()
	v := StudentView{Student: student, Flags: []string{}, Panes: []PaneView{}, Events: []string{}, Agents: []string{}, Audit: AuditNote,
		Nvim: NvimView{Lines: []BufLine{}, Diagnostics: []DiagView{}, Buffers: []string{}}}
	if t, ok := board.Get(student); ok {
		// The agents come from the status Live asks every 15 s: asking
		// here would write a gate_status line to the student's audit log
		// at every refresh of the page.
		v.Instance, v.Task, v.State, v.Flags, v.Agents = t.Instance, t.Task, t.State, t.Flags, t.Agents
	}
	v.Events = timeline(src, student)
	level, tools, ok := src.Grant(student)
	if !ok {
		v.Error = "not connected yet"
		for _, k := range src.Links() {
			if k.Student == student && k.Error != "" {
				v.Error = oneLine(k.Error)
			}
		}
		v.Millis = time.Since(start).Milliseconds()
		return v
	}
	has := func(t string) bool { return slices.Contains(tools, t) }
	v.Connected, v.Level = true, oneLine(level)
	v.Actions = Actions{Hint: has("nvim_hint"), Keys: has("pane_send_keys")}
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { v.Panes, v.PaneError = lookPanes(ctx, src, student, has) })
	run(func() { v.Nvim = lookNvim(ctx, src, student, has) })
	run(func() { v.GDB = lookGDB(ctx, src, student, has) })
	wg.Wait()
	v.Millis = time.Since(start).Milliseconds()
	return v
}

// timeline is the hub's events of this student, oldest first.
func timeline(src Source, student string) []string {
	out := []string{}
	// Since gives one bounded page at a time: read every page the hub
	// keeps (its event memory is bounded).
	for seq := int64(0); ; {
		evs := src.Since(context.Background(), seq, 0)
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			seq = max(seq, e.Seq)
			if e.Student == student {
				out = append(out, eventLine(e))
			}
		}
	}
	if len(out) > maxTimeline {
		out = out[len(out)-maxTimeline:]
	}
	return out
}

func lookPanes(ctx context.Context, src Source, student string, has func(string) bool) ([]PaneView, string) {
	if !has("pane_list") || !has("pane_capture") {
		return []PaneView{}, "the grant has no pane_list and pane_capture"
	}
	panes, err := listPanes(ctx, src, student)
	if err != nil {
		return []PaneView{}, oneLine(err.Error())
	}
	// The active window's panes first, then by window.
	slices.SortStableFunc(panes, func(a, b pane) int {
		if a.WindowActive != b.WindowActive {
			if a.WindowActive {
				return -1
			}
			return 1
		}
		return a.WindowIndex - b.WindowIndex
	})
	if len(panes) > maxPanes {
		panes = panes[:maxPanes]
	}
	out := make([]PaneView, len(panes))
	var wg sync.WaitGroup
	for i, p := range panes {
		label := fmt.Sprintf("%s  window %d %s  %s", p.ID, p.WindowIndex, p.WindowName, p.Command)
		if p.Title != "" {
			label += "  " + p.Title
		}
		if p.Role != "" {
			label += "  role " + p.Role
		}
		out[i] = PaneView{ID: oneLine(p.ID), Label: oneLine(label), Active: p.Active && p.WindowActive, Allowed: p.allowed(), Screen: [][]Run{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, err := capture(ctx, src, student, p.ID)
			if err != nil {
				out[i].Error = oneLine(err.Error())
				return
			}
			out[i].Screen = Screen(text, paneLines, MaxCols)
		}()
	}
	wg.Wait()
	return out, ""
}

// nvimStatus is the part of nvim_status the page shows.
type nvimStatus struct {
	Status struct {
		Mode    string          `json:"mode"`
		Buffer  int             `json:"buffer"`
		Line    int             `json:"line"`
		File    json.RawMessage `json:"file"`
		Buffers []struct {
			Number      int             `json:"number"`
			Name        json.RawMessage `json:"name"`
			Modified    bool            `json:"modified"`
			OutsideCard bool            `json:"outside_card"`
		} `json:"buffers"`
	} `json:"status"`
}

// rawText is a nvim.Text value ({"text": ..., "raw": ...}) as its
// readable string; a plain JSON string is taken too, anything else shown
// as its JSON.
func rawText(raw json.RawMessage) string {
	var t struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &t) == nil && t.Text != nil {
		return *t.Text
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func lookNvim(ctx context.Context, src Source, student string, has func(string) bool) NvimView {
	v := NvimView{Lines: []BufLine{}, Diagnostics: []DiagView{}, Buffers: []string{}}
	if !has("nvim_status") {
		v.Tool, v.Error = "nvim_status", "the grant has no nvim_status"
		return v
	}
	var st nvimStatus
	if _, err := call(ctx, src, student, "nvim_status", map[string]any{}, &st); err != nil {
		v.Error = oneLine(err.Error())
		return v
	}
	v.File, v.Mode, v.Cursor = oneLine(rawText(st.Status.File)), oneLine(st.Status.Mode), st.Status.Line
	for _, b := range st.Status.Buffers[:min(len(st.Status.Buffers), 50)] {
		line := fmt.Sprintf("%d %s", b.Number, rawText(b.Name))
		if b.Modified {
			line += " [+]"
		}
		if b.OutsideCard {
			line += " (outside the card)"
		}
		v.Buffers = append(v.Buffers, oneLine(line))
	}
	if st.Status.Buffer <= 0 {
		return v
	}
	worst := map[int]string{}
	if has("nvim_diagnostics") {
		var d struct {
			Diagnostics struct {
				Items []struct {
					Line     int             `json:"line"`
					Severity string          `json:"severity"`
					Message  json.RawMessage `json:"message"`
				} `json:"items"`
			} `json:"diagnostics"`
		}
		if _, err := call(ctx, src, student, "nvim_diagnostics", map[string]any{"buffer": st.Status.Buffer}, &d); err != nil {
			v.Error = oneLine(err.Error())
		}
		for _, it := range d.Diagnostics.Items[:min(len(d.Diagnostics.Items), maxDiags)] {
			sev := severity(it.Severity)
			v.Diagnostics = append(v.Diagnostics, DiagView{Line: it.Line, Severity: sev, Message: oneLine(rawText(it.Message))})
			if rank(sev) > rank(worst[it.Line]) {
				worst[it.Line] = sev
			}
		}
	}
	if !has("nvim_buffer_read") {
		return v
	}
	out, err := call(ctx, src, student, "nvim_buffer_read", map[string]any{"buffer": st.Status.Buffer, "max_bytes": bufferBytes}, nil)
	if err != nil {
		v.Error = oneLine(err.Error())
		return v
	}
	var meta struct {
		Truncated bool `json:"truncated"`
	}
	json.Unmarshal([]byte(out[0]), &meta)
	v.Truncated = meta.Truncated
	if len(out) > 1 {
		for i, l := range strings.Split(strings.TrimSuffix(out[1], "\n"), "\n") {
			if i == bufferLines {
				v.Truncated = true
				break
			}
			num, text, _ := strings.Cut(l, "\t")
			n, _ := strconv.Atoi(strings.TrimSpace(num))
			v.Lines = append(v.Lines, BufLine{N: n, Text: PlainText(Screen(text, 1, MaxCols)), Diag: worst[n]})
		}
	}
	return v
}

// severity is one of the page's four classes.
func severity(s string) string {
	switch s = strings.ToLower(s); s {
	case "error", "warning", "info", "hint":
		return s
	case "warn":
		return "warning"
	}
	return "info"
}

func rank(sev string) int {
	return map[string]int{"hint": 1, "info": 2, "warning": 3, "error": 4}[sev]
}

func lookGDB(ctx context.Context, src Source, student string, has func(string) bool) GDBView {
	if !has("gdb_status") {
		return GDBView{Error: "the grant has no gdb_status"}
	}
	out, err := call(ctx, src, student, "gdb_status", map[string]any{}, nil)
	if err != nil {
		return GDBView{Error: oneLine(err.Error())}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out[0]), &m); err != nil {
		return GDBView{Error: "gdb_status: not the answer expected"}
	}
	delete(m, "student")
	delete(m, "notice")
	v := GDBView{}
	if st, ok := m["state"].(string); ok {
		v.State = oneLine(st)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // shown as text: a < is a <
	enc.SetIndent("", "  ")
	enc.Encode(m)
	text := b.String()
	if len(text) > gdbBytes {
		text = text[:gdbBytes] + "\n…"
	}
	v.Text = PlainText(Screen(text, 400, MaxCols))
	return v
}

// agentLines are the agents the gate's status says run in the instances,
// one line each.
func agentLines(row class.Row) []string {
	var out []string
	for _, in := range row.Instances {
		for _, a := range in.Agents {
			line := fmt.Sprintf("%s: %s/%s", in.Instance, a.Provider, a.Level)
			if !a.Started.IsZero() {
				line += " since " + a.Started.Local().Format("15:04:05")
			}
			if a.Problem != "" {
				line += " (" + a.Problem + ")"
			}
			out = append(out, oneLine(line))
		}
	}
	return out
}
