package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A repository nested in the card (which the container can make, and git
// on the host would use there) stops every effectful call with what to do,
// audited as refused; reads go on, and once it is gone effects work again.
func TestUnsafeCardRefusesEffects(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	nested := filepath.Join(in.Resolved.CardPath, "t1", "x", ".git")
	if err := os.MkdirAll(filepath.Join(nested, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	hint := map[string]any{"path": "t1/words.c", "line": 1, "text": "a hint"}
	msg := s.refused("nvim_hint", hint)
	for _, want := range []string{"refused", "nothing was done", nested, "nested repository", "rm -rf"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q: %s", want, msg)
		}
	}
	var marks []any
	st.lua(&marks, `local ns = vim.api.nvim_create_namespace('stem-hint')
local out = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, ns, 0, -1, {})) do table.insert(out, m) end
end
return out`)
	if len(marks) != 0 {
		t.Fatalf("the refused hint was placed: %v", marks)
	}
	s.ok("pane_list", nil) // reads are not refused
	if m := s.refused("pane_send_keys", map[string]any{"pane": "%0", "keys": "x"}); !strings.Contains(m, nested) {
		t.Errorf("pane_send_keys: %s", m)
	}
	es, _ := readAudit(t, in.Dirs.State)
	var refused bool
	for _, e := range es {
		if e.Tool == "nvim_hint" && e.Result == "refused" && strings.Contains(e.Detail, nested) {
			refused = true
		}
		if e.Tool == "nvim_hint" && e.Event == "tool_intent" {
			t.Errorf("an intent was logged for the refused call: %+v", e)
		}
	}
	if !refused {
		t.Error("the refusal is not in the audit log")
	}
	os.RemoveAll(filepath.Dir(nested))
	s.ok("nvim_hint", hint)
}
