package class

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/sessionevent"
)

// A flooding student loses their own oldest events, counted; the other
// student keeps all of theirs. Times are the teacher side's; a gdb key
// "student" is dropped.
func TestRingFairShare(t *testing.T) {
	h := NewHub([]Student{{Name: "anna"}, {Name: "mallory"}}, HubOptions{Ring: 64})
	for i := range 10 {
		h.publish("anna", studentEvent{Event: sessionevent.Event{Seq: int64(i + 1), Type: "build_failed"}})
	}
	future, _ := time.Parse(time.RFC3339, "9999-12-31T23:59:59Z")
	for i := range 1000 {
		h.publish("mallory", studentEvent{Event: sessionevent.Event{Seq: int64(i + 1), Type: "gdb_stopped", Time: future},
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
		h.publish("anna", studentEvent{Event: sessionevent.Event{Seq: int64(i + 1), Type: "build_failed"}})
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

// A student's gate decides the gdb part's shape: one that is no object
// costs that part, not the event. The control shows the server's own
// struct would refuse the whole event.
func TestStudentEventSurvivesAnyGDB(t *testing.T) {
	for _, gdb := range []string{`"text"`, `[1,2]`, `7`, `null`, `{"reason":"signal-received"}`} {
		data := []byte(`{"seq":3,"type":"gdb_stopped","instance":"i","gdb":` + gdb + `}`)
		var ev studentEvent
		if err := json.Unmarshal(data, &ev); err != nil || ev.Seq != 3 || ev.Type != "gdb_stopped" || ev.Instance != "i" {
			t.Errorf("gdb %s: %+v %v", gdb, ev, err)
		}
		if got := flatGDB(ev.GDB); (gdb[0] == '{') != (got != nil) {
			t.Errorf("gdb %s: flattened to %v", gdb, got)
		}
	}
	var plain sessionevent.Event
	if err := json.Unmarshal([]byte(`{"seq":3,"type":"gdb_stopped","gdb":"text"}`), &plain); err == nil {
		t.Fatal("control: a string gdb part decoded into the server's struct")
	}
}
