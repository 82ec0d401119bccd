package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/audit"
	cmdproposals "github.com/stem-edu/stem/internal/cmd/proposals"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/provenance"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// hostProposals runs `stemctl proposals ARGS...` as the student on the
// host, without a terminal.
func hostProposals(t testing.TB, in *testenv.Instance, args ...string) (string, error) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Dirs:      func() (xdg.Dirs, error) { return in.Dirs, nil },
		Registry:  func() (*registry.Registry, error) { return registry.Open(in.Dirs.State) },
		Audit:     func() (*audit.Log, error) { return audit.Open(in.Dirs.State) },
	}
	cmd := cmdproposals.NewCmdProposals(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// hostRecord is the host store's record of proposal id.
func hostRecord(t *testing.T, in *testenv.Instance, id string) *proposals.Record {
	t.Helper()
	r, err := proposals.Open(in.Dirs.State, in.Name).Find(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decisionsOf are the audit log's decisions on proposal id.
func decisionsOf(t *testing.T, in *testenv.Instance, id string) []audit.Entry {
	t.Helper()
	es, _ := readAudit(t, in.Dirs.State)
	var out []audit.Entry
	for _, e := range es {
		if e.Event == audit.ProposalDecision && strings.HasPrefix(e.Detail, id+" ") {
			out = append(out, e)
		}
	}
	return out
}

// recordedProposals are the proposals provenance holds changes of.
func recordedProposals(t *testing.T, in *testenv.Instance, file string) []string {
	t.Helper()
	h, err := provenance.Open(in.Dirs.State).Read(in.Resolved.CardPath, file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range h.Changes {
		out = append(out, c.Proposal+" "+c.AcceptedBy)
	}
	return out
}
