package dashboard

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// colourScreen is a busy 40-line screen: a compiler's coloured errors.
func colourScreen(i int) string {
	var b strings.Builder
	for l := range 40 {
		fmt.Fprintf(&b, "\x1b[1mhello.c:%d:5:\x1b[0m \x1b[1;31merror:\x1b[0m expected ';' before '}' token [%d]\n", l, i)
	}
	return b.String()
}

// The teacher's side of one look at one student's screen.
func BenchmarkScreen(b *testing.B) {
	s := colourScreen(1)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		Screen(s, MaxLines, MaxCols)
	}
}

// Thirty students whose screens all change, one page streaming: the cost
// of one round (30 updates, the page's send) on the server.
func BenchmarkThirtyBusy(b *testing.B) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	board := NewBoard(names)
	s := NewServer(board, token, "lab")
	s.MinGap = 0
	srv := httptest.NewServer(s)
	b.Cleanup(srv.Close) // after the stream's own cleanup closed it
	st := openSSE(b, srv.URL+"/events?token="+token)
	st.next(b)
	st.next(b)
	screens := make([][][]Run, 2)
	for i := range screens {
		screens[i] = Screen(colourScreen(i), MaxLines, MaxCols)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for _, n := range names {
			board.Update(n, func(t *Tile) { t.Screen = screens[i%2] })
		}
		got := 0
		for got < 30 {
			_, tiles := st.next(b)
			got += len(tiles)
		}
	}
}

// Thirty idle students: a look that finds the screen unchanged.
func BenchmarkThirtyIdle(b *testing.B) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	board := NewBoard(names)
	screen := Screen(colourScreen(0), MaxLines, MaxCols)
	for _, n := range names {
		board.Update(n, func(t *Tile) { t.Screen = screen })
	}
	for b.Loop() {
		for _, n := range names {
			board.Update(n, func(t *Tile) { t.Screen = Screen(colourScreen(0), MaxLines, MaxCols) })
		}
	}
}
