package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/class"
)

// ActionHeader must be on every action request. A page of another origin
// cannot send it without the browser first asking this server (a CORS
// preflight, which it never allows), and a form cannot send it at all:
// with the Origin and Sec-Fetch-Site checks, only the dashboard's own
// page acts, whatever cookie or token the request carries.
const ActionHeader = "X-Stem-Action"

// Bounds of an action: as the gate's own (nvim.MaxHintBytes, the keys
// spec), well below.
const (
	maxActionBody = 8 << 10
	maxHintText   = 500
	maxKeysSpec   = 1000
)

// Hint is a hint in the student's Neovim: a note at a line of a file open
// there (nvim_hint).
type Hint struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Keys are keys for a pane the student allows (pane_send_keys): literal
// text with named keys in braces, e.g. `make{Enter}`.
type Keys struct {
	Pane string `json:"pane"`
	Keys string `json:"keys"`
}

// ActionResult is what the page shows after an action.
type ActionResult struct {
	OK     bool   `json:"ok"`
	Tool   string `json:"tool"`
	Result string `json:"result,omitempty"` // the gate's answer, one line
	Error  string `json:"error,omitempty"`
}

// sameOrigin refuses what another page could make a browser send.
func sameOrigin(r *http.Request) error {
	if r.Header.Get(ActionHeader) != "1" {
		return fmt.Errorf("an action needs the %s header the dashboard's page sends", ActionHeader)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return errors.New("an action is JSON (Content-Type: application/json)")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("an action from another site or origin (%s)", oneLine(site))
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return fmt.Errorf("an action from another origin (%s)", oneLine(o))
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// action checks the request and the grant, decodes the body into v, and
// returns the student (ok false: answered already).
func (s *Server) action(w http.ResponseWriter, r *http.Request, tool string, v any) (string, bool) {
	if err := sameOrigin(r); err != nil {
		writeJSON(w, http.StatusForbidden, ActionResult{Tool: tool, Error: err.Error()})
		return "", false
	}
	student := r.PathValue("name")
	if s.Students == nil || !s.board.Has(student) {
		writeJSON(w, http.StatusNotFound, ActionResult{Tool: tool, Error: "no such student in this class"})
		return "", false
	}
	level, tools, ok := s.Students.Grant(student)
	if !ok {
		writeJSON(w, http.StatusConflict, ActionResult{Tool: tool, Error: "no open session with student " + student + " now"})
		return "", false
	}
	if !slices.Contains(tools, tool) {
		writeJSON(w, http.StatusForbidden, ActionResult{Tool: tool,
			Error: fmt.Sprintf("%s refused: student %s's grant is at level %s, which does not include %s", tool, student, oneLine(level), tool)})
		return "", false
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, ActionResult{Tool: tool, Error: "the action is not what the page sends: " + oneLine(err.Error())})
		return "", false
	}
	return student, true
}

// forward sends the action through the hub, so the student's gate checks
// and audits it as any call of that tool.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, student, tool string, args map[string]any) {
	ctx, cancel := context.WithTimeout(r.Context(), studentLookup)
	defer cancel()
	out, err := call(ctx, s.Students, student, tool, args, nil)
	if err != nil {
		code := http.StatusBadGateway
		var ref *class.RefusedError
		if errors.As(err, &ref) {
			code = http.StatusForbidden
		}
		writeJSON(w, code, ActionResult{Tool: tool, Error: oneLine(err.Error())})
		return
	}
	var m map[string]any
	result := out[0]
	if json.Unmarshal([]byte(out[0]), &m) == nil {
		delete(m, "student")
		delete(m, "notice")
		b, _ := json.Marshal(m)
		result = string(b)
	}
	writeJSON(w, http.StatusOK, ActionResult{OK: true, Tool: tool, Result: oneLine(result)})
}

func oneLineOK(s string, max int) bool {
	return s != "" && len(s) <= max && utf8.ValidString(s) && !strings.ContainsAny(s, "\n\r\x00")
}

func (s *Server) hint(w http.ResponseWriter, r *http.Request) {
	var h Hint
	student, ok := s.action(w, r, "nvim_hint", &h)
	if !ok {
		return
	}
	if !oneLineOK(h.Path, 4096) || h.Line < 1 || !oneLineOK(h.Text, maxHintText) {
		writeJSON(w, http.StatusBadRequest, ActionResult{Tool: "nvim_hint", Error: fmt.Sprintf("a hint is a file open in Neovim, a line from 1, and one line of text (at most %d bytes)", maxHintText)})
		return
	}
	s.forward(w, r, student, "nvim_hint", map[string]any{"path": h.Path, "line": h.Line, "text": h.Text})
}

func (s *Server) keys(w http.ResponseWriter, r *http.Request) {
	var k Keys
	student, ok := s.action(w, r, "pane_send_keys", &k)
	if !ok {
		return
	}
	if !oneLineOK(k.Pane, 32) || !strings.HasPrefix(k.Pane, "%") || !oneLineOK(k.Keys, maxKeysSpec) {
		writeJSON(w, http.StatusBadRequest, ActionResult{Tool: "pane_send_keys", Error: fmt.Sprintf("keys are a pane (%%N) and one line of keys (at most %d bytes; {Enter} for Enter)", maxKeysSpec)})
		return
	}
	// Only panes the student allows, at every level (at full the gate
	// would take any pane; the page does not offer that).
	ctx, cancel := context.WithTimeout(r.Context(), studentLookup)
	defer cancel()
	panes, err := listPanes(ctx, s.Students, student)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, ActionResult{Tool: "pane_send_keys", Error: oneLine(err.Error())})
		return
	}
	allowed := false
	for _, p := range panes {
		allowed = allowed || (p.ID == k.Pane && p.allowed())
	}
	if !allowed {
		writeJSON(w, http.StatusForbidden, ActionResult{Tool: "pane_send_keys",
			Error: fmt.Sprintf("pane %s is not one the student allows keys in (they allow one on their machine with `stemctl allow INSTANCE PANE`)", oneLine(k.Pane))})
		return
	}
	s.forward(w, r, student, "pane_send_keys", map[string]any{"pane": k.Pane, "keys": k.Keys})
}
