package consent

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestByNamesTheTerminal: a decision typed on a terminal names it; one
// read from a pipe or a buffer says it had none.
func TestByNamesTheTerminal(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if got := By("stemctl allow", tty); got != "stemctl allow on "+tty.Name() || !strings.HasPrefix(tty.Name(), "/dev/pts/") {
		t.Errorf("on a pty: %q (pty %s)", got, tty.Name())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, in := range []any{r, &bytes.Buffer{}, nil} {
		if got := By("stemctl allow", in); got != "stemctl allow without a terminal" {
			t.Errorf("%T: %q", in, got)
		}
	}
}
