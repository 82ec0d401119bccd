package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/testenv/modelserver"
)

const hazardInst = "hazard3-sim-inf-bss-t4"

// The assist scenario with a real CLI: `stemctl agent start claude
// hazard3-sim inf bss 4`, and the scripted model reads the task and the
// student's gdb pane, breaks at main, continues, and leaves a hint in the
// student's Neovim. The student's own gdb stops at the breakpoint, the
// hint is virtual text in their Neovim, and every result reaches the
// model.
func TestAssistScenarioWithRealCLI(t *testing.T) {
	t.Parallel() // its own account and model
	for _, provider := range []string{"claude", "codex", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			b := newBoxAccount(t)
			b.must("up", "hazard3-sim", "inf", "bss", "4")
			b.must("build", hazardInst)
			var lay debugLayout
			b.mustJSON(&lay, "debug", hazardInst, "--no-build")
			st := b.status(hazardInst)
			b.waitPane(st, lay.GDBPane, "(gdb)", 30*time.Second)
			hint := "stem-hint: the bss starts here"
			b.ms.SetScript(
				modelserver.Call("task_info", nil),
				modelserver.Call("pane_capture", map[string]any{"pane": lay.GDBPane}),
				modelserver.Call("gdb_break", map[string]any{"location": "main"}),
				modelserver.Call("gdb_continue", map[string]any{"wait_ms": 20000}),
				modelserver.Call("nvim_hint", map[string]any{"path": "t4/main.c", "line": 25, "text": hint}),
				modelserver.Say("stem-assist-done"))
			rec := b.startTask(provider, []string{"hazard3-sim", "inf", "bss", "4"})
			b.prompt(st, rec, "help me debug")
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			want := []string{"bss", "(gdb)", "main", "breakpoint-hit", "hint_id"}
			for i, w := range want {
				res, err := b.ms.WaitResult(ctx, i)
				if err != nil {
					t.Fatalf("no result of step %d: %v\nits window:\n%s\nlog:\n%s", i, err, b.capture(st, rec.Pane), readFile(rec.Log))
				}
				t.Logf("%s: step %d result: %.120q", provider, i, res.Content)
				if res.IsError || !strings.Contains(res.Content, w) {
					t.Errorf("step %d result (error %v) lacks %q: %.600s", i, res.IsError, w, res.Content)
				}
			}
			b.waitPane(st, lay.GDBPane, "Breakpoint 1, main", 10*time.Second)
			// the hint's text: at the end of its line, or its rows below it joined
			marks := b.nvimExpr(st, `luaeval("table.concat(vim.tbl_map(function(m) local s = '' for _, c in ipairs(m[4].virt_text or {}) do s = s .. c[1] end for _, r in ipairs(m[4].virt_lines or {}) do for _, c in ipairs(r) do s = s .. ' ' .. c[1] end end return s end, vim.api.nvim_buf_get_extmarks(vim.fn.bufnr('main.c'), vim.api.nvim_create_namespace('stem-hint'), 0, -1, {details = true})), ' | ')")`)
			if !strings.Contains(marks, hint) || !strings.Contains(marks, "hint from ") {
				t.Errorf("the hint is not virtual text in the student's Neovim: %s", marks)
			}
			if _, err := b.ms.Wait(ctx, func(r modelserver.Request) bool { return r.Step == len(want) }); err != nil {
				t.Errorf("the model was never asked after the last result: %v", err)
			}
		})
	}
}

// nvimExpr evaluates a Vim expression in the instance's Neovim.
func (b *boxAccount) nvimExpr(st instanceInfo, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Command(ctx, "nvim", "--headless", "--server", st.Record.SocketDir+"/n.sock", "--remote-expr", expr).CombinedOutput()
	if err != nil {
		b.t.Fatalf("nvim --remote-expr: %v\n%s", err, out)
	}
	return string(out)
}
