package class

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A flooding student loses their own oldest events, counted; the other
// student keeps all of theirs. Times are the teacher side's; a gdb key
// "student" is dropped.
func TestRingFairShare(t *testing.T) {
	h := NewHub([]Student{{Name: "anna"}, {Name: "mallory"}}, HubOptions{Ring: 64})
	for i := range 10 {
		h.publish("anna", studentEvent{Seq: int64(i + 1), Type: "build_failed"})
	}
	future, _ := time.Parse(time.RFC3339, "9999-12-31T23:59:59Z")
	for i := range 1000 {
		h.publish("mallory", studentEvent{Seq: int64(i + 1), Type: "gdb_stopped", Time: future,
			GDB: json.RawMessage(`{"student":"anna","studentx":"y","reason":"breakpoint-hit","Bad Key":"z"}`)})
	}
	p := h.Page(context.Background(), 0, 0)
	n := map[string]int{}
	for _, e := range p.Events {
		n[e.Student]++
		if e.Time.After(time.Now()) {
			t.Fatalf("the student's clock: %+v", e)
		}
		if e.Student == "mallory" && (len(e.GDB) != 1 || e.GDB["reason"] != "breakpoint-hit") {
			t.Fatalf("gdb map: %v", e.GDB)
		}
	}
	if n["anna"] != 10 || n["mallory"] != 32 || p.Dropped["mallory"] != 968 || p.Dropped["anna"] != 0 || p.More {
		t.Fatalf("kept %v, dropped %v, more %v", n, p.Dropped, p.More)
	}
	for _, l := range h.Links() {
		if l.Student == "mallory" && l.Dropped != 968 {
			t.Fatalf("link: %+v", l)
		}
	}
}

// Pages are bounded and follow on from next without gaps or repeats.
func TestRingPages(t *testing.T) {
	h := NewHub([]Student{{Name: "anna"}}, HubOptions{Ring: 2048})
	for i := range 600 {
		h.publish("anna", studentEvent{Seq: int64(i + 1), Type: "build_failed"})
	}
	var since int64
	var sizes []int
	for {
		p := h.Page(context.Background(), since, 0)
		for i, e := range p.Events {
			if e.Seq != since+int64(i)+1 {
				t.Fatalf("page after %d: event %d has seq %d", since, i, e.Seq)
			}
		}
		sizes = append(sizes, len(p.Events))
		since = p.Next
		if !p.More {
			break
		}
	}
	if len(sizes) != 3 || sizes[0] != MaxPageEvents || sizes[1] != MaxPageEvents || sizes[2] != 600-2*MaxPageEvents || since != 600 {
		t.Fatalf("pages %v, next %d", sizes, since)
	}
}
