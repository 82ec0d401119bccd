package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP allows the page's own script, style sheet and stream and nothing
// else: no inline script or style, no other origin, no frames, no forms.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const cookieName = "stem_dashboard"

// NewToken is a random token for the page's address (128 bits).
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Server is the dashboard's HTTP handler.
type Server struct {
	board *Board
	token string
	class string
	// MinGap is the least time between two sends on one stream: changes
	// within it go out together (default 100ms).
	MinGap time.Duration
	// Keepalive is how often an idle stream gets a comment (default 15s).
	Keepalive time.Duration
	// Students are the class's open sessions: the student page and its
	// actions go through them (nil: no student page).
	Students Source
	mux      *http.ServeMux
}

// NewServer serves board to whoever presents token.
func NewServer(board *Board, token, class string) *Server {
	s := &Server{board: board, token: token, class: class, MinGap: 100 * time.Millisecond, Keepalive: 15 * time.Second, mux: http.NewServeMux()}
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServer(http.FS(static))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /app.js", files)
	s.mux.Handle("GET /app.css", files)
	s.mux.HandleFunc("GET /palette.css", palette)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("GET /tiles", s.tiles)
	s.mux.HandleFunc("GET /student/{name}", s.studentPage)
	s.mux.HandleFunc("POST /student/{name}/hint", s.hint)
	s.mux.HandleFunc("POST /student/{name}/keys", s.keys)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !s.authorized(r) {
		http.Error(w, "401 unauthorized: open the address with the token that `stemctl class serve` printed", http.StatusUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized takes the token from the address (the first visit) or the
// cookie the first visit set (the page's own requests).
func (s *Server) authorized(r *http.Request) bool {
	got := r.URL.Query().Get("token")
	if got == "" {
		if c, err := r.Cookie(cookieName); err == nil {
			got = c.Value
		}
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("token") != "" {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
}

// tiles is every tile at once, as JSON (for scripts and tests).
func (s *Server) tiles(w http.ResponseWriter, r *http.Request) {
	t, _, _ := s.board.Since(0)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"class": s.class, "tiles": t})
}

// events streams the tiles as server-sent events: all of them first, then
// only those that changed since the last send.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	hello, _ := json.Marshal(map[string]string{"class": s.class})
	fmt.Fprintf(w, "event: hello\ndata: %s\n\n", hello)
	fl.Flush()
	keep := time.NewTicker(s.Keepalive)
	defer keep.Stop()
	var sent int64
	for {
		tiles, v, changed := s.board.Since(sent)
		if len(tiles) > 0 {
			data, err := json.Marshal(tiles)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "event: tiles\ndata: %s\n\n", data); err != nil {
				return
			}
			fl.Flush()
			sent = v
			// Changes within MinGap go out together: thirty busy
			// screens cost one send per gap, not one per keystroke.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(s.MinGap):
			}
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// palette is the style sheet of the 256 colour classes (xterm's colours).
func palette(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	for i := 0; i < 256; i++ {
		c := xterm(i)
		fmt.Fprintf(&b, ".f%d{color:%s}.b%d{background-color:%s}\n", i, c, i, c)
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Write([]byte(b.String()))
}

var basic = [16]string{"#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
	"#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"}

func xterm(i int) string {
	switch {
	case i < 16:
		return basic[i]
	case i < 232:
		i -= 16
		lv := func(v int) int {
			if v == 0 {
				return 0
			}
			return 55 + 40*v
		}
		return fmt.Sprintf("#%02x%02x%02x", lv(i/36), lv(i/6%6), lv(i%6))
	default:
		g := 8 + 10*(i-232)
		return fmt.Sprintf("#%02x%02x%02x", g, g, g)
	}
}
