package mcpserver_test

import (
	"strings"
	"testing"
)

// Reads may rest on a verification a moment old (at most reverifyEvery);
// an effect goes only to a container verified when it is asked for. With
// the container removed behind stem's back (its tmux and Neovim, run on
// the host by the fixture, still answer), the very next effectful call is
// refused and changes nothing, though a read just before was served.
func TestFaultContainerRemovedEffectRefusedAtOnce(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	s := connect(t, in, "assist")
	s.ok("nvim_open", map[string]any{"path": "t1/words.c"})
	s.ok("pane_list", nil) // verified just now
	in.RemoveContainer()
	msg := s.refused("nvim_hint", map[string]any{"path": "t1/words.c", "line": 1, "text": "a hint"})
	if !strings.Contains(msg, "no longer exists") || !strings.Contains(msg, "stemctl up") {
		t.Fatalf("the refusal does not say what happened and how to fix it: %s", msg)
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
	if m := s.refused("pane_send_keys", map[string]any{"pane": "%0", "keys": "echo hi"}); !strings.Contains(m, "stemctl up") {
		t.Errorf("pane_send_keys after the removal: %s", m)
	}
}
