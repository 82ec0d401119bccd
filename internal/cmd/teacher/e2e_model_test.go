package teacher

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

// The teacher's own Claude Code, with the entry `teacher config --write`
// made and nothing else set, is driven by a scripted model: it finds stem's
// tools through its ToolSearch (Claude Code defers MCP tools behind it by
// default) and calls gate_status through the real sshd and gate; the result
// names the student's grant at its level. Before the search the model is
// offered no stem tool: the control that the search is what found it.
func TestTeacherEntryDrivenByClaude(t *testing.T) {
	r := newTeacherRig(t)
	claude := clitest.Bin(t, "claude")
	r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"config", "--provider", "claude", "--scope", "user", "--name", "anna", "--write"}, r.flags...)...)

	ms, err := modelserver.Start(
		modelserver.Call("ToolSearch", map[string]any{"query": "gate_status", "max_results": 5}),
		modelserver.Call("gate_status", map[string]any{}),
		modelserver.Say("stem-teacher-done"))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// --allowedTools is the teacher's yes to Claude's permission prompt
	// for the entry's tools (a -p run cannot ask).
	cmd := exec.CommandContext(ctx, claude, "-p", "--allowedTools", "mcp__anna", "--output-format", "stream-json", "--verbose", "what is anna's grant?")
	cmd.Dir = r.home
	cmd.Env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
		"ANTHROPIC_API_KEY=sk-stem-test", "ANTHROPIC_BASE_URL=" + ms.URL, "DISABLE_AUTOUPDATER=1",
		"MCP_TIMEOUT=120000"} // a loaded machine connects slowly: the CLI would go on without the server
	out, err := cmd.CombinedOutput()
	for i, req := range ms.Requests() {
		t.Logf("request %d: %s tools %d (stem: %v) step %d called %q results %d", i, req.Path, len(req.Tools), stemTools(req.Tools), req.Step, req.Called, len(req.Results))
	}
	if err != nil {
		t.Fatalf("claude: %v\n%.4000s", err, out)
	}
	reqs := ms.Requests()
	for _, req := range reqs {
		if req.Step == 0 && len(stemTools(req.Tools)) != 0 {
			t.Errorf("the request before ToolSearch already offered stem tools %v: the search path is not tested", stemTools(req.Tools))
		}
		if req.Step == 1 && !req.HasTool("gate_status") {
			t.Errorf("after ToolSearch the model is not offered gate_status: %v", req.Tools)
		}
	}
	res, err := ms.WaitResult(ctx, 1)
	if err != nil {
		t.Fatalf("no gate_status result reached the model: %v\n%.4000s", err, out)
	}
	if res.IsError || !strings.Contains(res.Content, `kowalski`) || !strings.Contains(res.Content, `observe`) {
		t.Fatalf("gate_status through the teacher's entry: %+v", res)
	}
}

func stemTools(tools []string) []string {
	var out []string
	for _, n := range tools {
		if strings.HasPrefix(n, "mcp__anna__") {
			out = append(out, strings.TrimPrefix(n, "mcp__anna__"))
		}
	}
	return out
}

// With ENABLE_TOOL_SEARCH=false, the teacher's Claude offers the model all
// of the entry's tools at once: exactly the observe level's (the grant's)
// and the gate's own gate_status, nothing effectful.
func TestTeacherEntryOffersTheGrantsLevel(t *testing.T) {
	r := newTeacherRig(t)
	claude := clitest.Bin(t, "claude")
	r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"config", "--provider", "claude", "--scope", "user", "--name", "anna", "--write"}, r.flags...)...)
	ms, err := modelserver.Start(modelserver.Say("stem-teacher-done"))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "--output-format", "stream-json", "--verbose", "hello")
	cmd.Dir = r.home
	cmd.Env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "ENABLE_TOOL_SEARCH=false",
		"ANTHROPIC_API_KEY=sk-stem-test", "ANTHROPIC_BASE_URL=" + ms.URL, "DISABLE_AUTOUPDATER=1",
		"MCP_TIMEOUT=120000"} // a loaded machine connects slowly: the CLI would go on without the server
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("claude: %v\n%.4000s", err, out)
	}
	want := append(mcpserver.ToolNames(mcpserver.Observe), "gate_status")
	slices.Sort(want)
	for _, req := range ms.Requests() {
		if req.Step != 0 {
			continue
		}
		got := stemTools(req.Tools)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("the teacher's Claude offered %v, want the observe set and gate_status %v", got, want)
		}
		return
	}
	t.Fatalf("no request took the script's step: %+v", ms.Requests())
}
