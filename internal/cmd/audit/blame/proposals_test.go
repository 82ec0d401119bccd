package blame_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/provenance"
)

// TestBlameProposals: a proposal accepted on the host is the agent's,
// "accepted by the student at" the host input; the text of one nobody
// accepted on the host, written into the file in the container, is the
// container's and says whose proposal it matches. The control: the same
// line, accepted, is the agent's.
func TestBlameProposals(t *testing.T) {
	e := newEnv(t)
	before := []string{"int main(void)", "{", "    return 0;", "}"}
	accepted := "    puts(\"accepted on the host\");"
	notAccepted := "    puts(\"proposed, never accepted\");"
	_, err := provenance.Open(e.state).Record(context.Background(), provenance.Change{Card: e.card, Path: "t1/main.c",
		Who: provenance.Who{Account: "alice", Agent: "3f9a1c", Level: "assist"}, Tool: "nvim_buffer_edit", Proposal: "p1",
		AcceptedBy: "the student at stemctl proposals on /dev/pts/5", Before: before,
		Hunks: []provenance.Hunk{{Start: 3, End: 2, Lines: []string{accepted}}}})
	if err != nil {
		t.Fatal(err)
	}
	store := proposals.Open(e.state, "native-amd64-inf-bss-t1")
	for i, st := range []string{proposals.Rejected, proposals.Pending} {
		r := &proposals.Record{Key: strings.Repeat("ab", 15) + "0" + string(rune('0'+i)), ID: "p" + string(rune('2'+i)), Instance: "native-amd64-inf-bss-t1",
			Card: e.card, Path: "t1/main.c", From: "agent 3f9a1c", Created: time.Now(),
			Hunks: []proposals.Hunk{{Start: 3, New: []string{notAccepted}, State: st}}}
		if err := store.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	p := e.write(t, "t1/main.c", strings.Join([]string{before[0], before[1], accepted, notAccepted, before[2], before[3]}, "\n")+"\n")
	if err := e.run(t, p); err != nil {
		t.Fatal(err)
	}
	out := e.out.String()
	for _, want := range []string{
		"agent 3f9a1c (assist), accepted by the student at stemctl proposals on /dev/pts/5",
		"4  container !",
		"1 container line(s) have the text of a proposal that no host decision accepted: p3 of agent 3f9a1c (pending",
		"container: 5 lines, written in the container (the student or their programs)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	e.out.Reset()
	if err := e.run(t, p, "--json"); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Lines []struct {
			By         string `json:"by"`
			AcceptedBy string `json:"accepted_by"`
			Unaccepted *struct {
				ID, State string
			} `json:"unaccepted_proposal"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(e.out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	l3, l4 := rep.Lines[2], rep.Lines[3]
	if l3.By != "agent" || l3.AcceptedBy == "" || l3.Unaccepted != nil || l4.By != "container" || l4.Unaccepted == nil || l4.Unaccepted.ID != "p3" {
		t.Fatalf("json %+v", rep.Lines)
	}
	// Control: the line nobody accepted is marked by its text, nothing else.
	if rep.Lines[4].Unaccepted != nil {
		t.Fatalf("line 5 %+v", rep.Lines[4])
	}
}
