package tmux_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stem-edu/stem/internal/tmux"
)

// TestPromptFileMatchesConstant: the file the images source and the text
// the Go code (and tmuxtest) use are the same bytes.
func TestPromptFileMatchesConstant(t *testing.T) {
	path := filepath.Join("..", "..", "containers", "files", "shell", "stem-prompt.sh")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	if string(b) != tmux.PromptIntegration {
		t.Fatalf("%s and tmux.PromptIntegration differ: run go generate ./internal/tmux", path)
	}
}

// TestPromptSnippetInertOutsideInteractiveBash: sourcing the snippet from a
// non-interactive bash or from sh does nothing and fails nothing.
func TestPromptSnippetInertOutsideInteractiveBash(t *testing.T) {
	path, _ := filepath.Abs(filepath.Join("..", "..", "containers", "files", "shell", "stem-prompt.sh"))
	// Each shell must print exactly its line: an empty output would mean
	// the snippet ended the shell before the echo.
	for _, c := range []struct {
		sh   []string
		want string
	}{
		{[]string{"bash", "-c", `. "$0"; echo "rc=$? pc=${PROMPT_COMMAND-unset} ps0=${PS0-unset}"`, path}, "rc=0 pc=unset ps0=unset\n"},
		{[]string{"sh", "-c", `. "$0"; echo "rc=$?"`, path}, "rc=0\n"},
		{[]string{"bash", "-n", path}, ""},
	} {
		out, err := exec.Command(c.sh[0], c.sh[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", c.sh, err, out)
		}
		if string(out) != c.want {
			t.Errorf("%q printed %q, want %q", c.sh, out, c.want)
		}
	}
}
