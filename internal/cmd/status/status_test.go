package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/instance"
	"github.com/stem-edu/stem/internal/registry"
)

func TestPrintCardStateAndStale(t *testing.T) {
	id := strings.Repeat("ab", 32)
	rec := registry.Record{Instance: "native-amd64-demo-hello-t1", Profile: "native-amd64", Series: "demo", Card: "hello", Task: "1", ContainerID: id}
	for _, c := range []struct {
		st   instance.Status
		want []string
	}{
		{instance.Status{Record: rec, State: "running", CardState: &instance.CardState{Dir: "/c/.stem/instances/x", ContainerID: id, Current: true}},
			[]string{"card state /c/.stem/instances/x, names the current container abababababab"}},
		{instance.Status{Record: rec, State: "running", CardState: &instance.CardState{Dir: "/c/.rv/instances/x", Legacy: true, ContainerID: strings.Repeat("c", 64)}},
			[]string{"card state /c/.rv/instances/x (older .rv/ layout; the next `stemctl up` writes .stem/)", "names container cccccccccccc, not the current one"}},
		{instance.Status{Record: rec, State: "running", CardState: &instance.CardState{Error: "no state"}},
			[]string{"card state none (no state); the next `stemctl up` writes it"}},
		{instance.Status{Record: rec, State: "running", Stale: []string{"/r/stem/k/i/0123456789ab"}},
			[]string{"stale      /r/stem/k/i/0123456789ab (a previous container's socket directory; `stemctl up native-amd64 demo hello 1` removes it)"}},
	} {
		var b bytes.Buffer
		Print(&b, c.st)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, b.String())
			}
		}
	}
}
