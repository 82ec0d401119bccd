package mcpcmd

import (
	"runtime"
	"testing"
)

// A session runs on one processor unless GOMAXPROCS asks for more.
func TestOneProc(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	runtime.GOMAXPROCS(3)
	oneProc(func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	})
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS=3 in the environment: %d processors", got)
	}
	oneProc(func(string) string { return "" })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("no GOMAXPROCS: %d processors, want 1", got)
	}
}
