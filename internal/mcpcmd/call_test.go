package mcpcmd

import (
	"context"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
)

// Bad --args or --level are flag errors before any server starts.
func TestCallRefusesBadArgumentsFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"call", "--level", "observe", "--args", `[1]`, "pane_list"}, "--args"},
		{[]string{"call", "--level", "observe", "--args", `null`, "pane_list"}, "--args"},
		{[]string{"call", "--level", "observe", "--args", `{"a":1} {"b":2}`, "pane_list"}, "text after the object"},
		{[]string{"call", "--level", "observe", "--args", `{"a":`, "pane_list"}, "--args"},
		{[]string{"call", "--level", "root", "pane_list"}, "--level"},
		{[]string{"call", "pane_list"}, "level"},
	} {
		ios, _, out, _ := iostreams.Test()
		cmd := NewCmdRoot(ios, func(string) string { return "" })
		cmd.SetArgs(c.args)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to mention %s", c.args, err, c.want)
		}
		if c.want != "level" && !cmdutil.IsFlagError(err) {
			t.Errorf("%v: %v is not a flag error", c.args, err)
		}
		if out.Len() != 0 {
			t.Errorf("%v printed %q", c.args, out.String())
		}
	}
}
