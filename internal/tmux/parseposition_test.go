package tmux

import (
	"errors"
	"testing"
)

func TestParsePosition(t *testing.T) {
	t.Parallel()
	p, err := parsePosition("120 7 48 2000")
	if err != nil || p != (Position{HistorySize: 120, CursorY: 7, Height: 48, HistoryLimit: 2000}) {
		t.Fatalf("parsePosition = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 4 5", "1 2 3 x", "1  2 3 4", "1 2 3 4 ", " 1 2 3 4", "1\t2 3 4"} {
		if p, err := parsePosition(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("parsePosition(%q) = %+v, %v: want a protocol error", bad, p, err)
		}
	}
}
