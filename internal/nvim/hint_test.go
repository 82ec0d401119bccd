package nvim

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/nvim/nvimtest"
)

// shownHint is how a hint is shown: at the end of its line, or as the
// rows below it.
type shownHint struct {
	EOL  string   `msgpack:"eol"`
	Rows []string `msgpack:"rows"`
	Room int      `msgpack:"room"`
}

func hintShown(t *testing.T, n *nvimtest.Nvim, buf, id int) shownHint {
	t.Helper()
	var h shownHint
	n.Lua(t, &h, `local buf, id = ...
local ns = vim.api.nvim_create_namespace('stem-hint')
local m = vim.api.nvim_buf_get_extmark_by_id(buf, ns, id, {details = true})
local d = m[3] or {}
local eol, rows = '', {}
for _, c in ipairs(d.virt_text or {}) do eol = eol .. c[1] end
for _, l in ipairs(d.virt_lines or {}) do
  local s = ''
  for _, c in ipairs(l) do s = s .. c[1] end
  rows[#rows + 1] = s
end
local i = vim.fn.getwininfo(vim.api.nvim_get_current_win())[1]
return {eol = eol, rows = rows, room = i.width - i.textoff}`, buf, id)
	return h
}

// TestHintLabelledAndFits: a hint names who gave it, and fits the
// window: at the end of its line when there is room, else wrapped below
// it, never cut at the window's edge.
func TestHintLabelledAndFits(t *testing.T) {
	n, c := start(t, nvimtest.Options{})
	ctx := testCtx(t)
	buf := edit(t, n, writeFile(t, n.Dir, "f.c", "int main(void)\n{\n    return 0;\n}\n"))
	n.Exec(t, "set number")

	id, err := c.Hint(ctx, buf, 3, "agent codex", "check the exit code")
	if err != nil {
		t.Fatal(err)
	}
	if h := hintShown(t, n, buf, id); h.EOL != "hint from agent codex: check the exit code" || len(h.Rows) != 0 {
		t.Errorf("short hint at 100 columns: %+v", h)
	}

	long := "the loop runs one time too many: compare i with n, not n + 1, and look at what the last iteration reads"
	for _, cols := range []int{80, 60} {
		n.Exec(t, fmt.Sprintf("set columns=%d", cols))
		id, err := c.Hint(ctx, buf, 3, "teacher \x1b[31malice\x07", long)
		if err != nil {
			t.Fatal(err)
		}
		h := hintShown(t, n, buf, id)
		if h.EOL != "" || len(h.Rows) < 2 {
			t.Fatalf("%d columns: a long hint is not wrapped below its line: %+v", cols, h)
		}
		if got := strings.Join(h.Rows, " "); got != "hint from teacher [31malice: "+long {
			t.Errorf("%d columns: hint reads %q", cols, got)
		}
		for _, r := range h.Rows {
			if w := utf8.RuneCountInString(r); w > h.Room {
				t.Errorf("%d columns: row %q is %d wide, the window's text %d", cols, r, w, h.Room)
			}
		}
	}
	// A hint without an author still says it is one.
	id, err = c.Hint(ctx, buf, 1, " ", "x")
	if err != nil {
		t.Fatal(err)
	}
	if h := hintShown(t, n, buf, id); h.EOL != "hint: x" {
		t.Errorf("hint without author: %+v", h)
	}
}
