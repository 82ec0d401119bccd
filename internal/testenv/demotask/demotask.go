// Package demotask knows what tests need of the demo card's first task
// (examples/workspace/demo/hello, task 1): the bug its student fixes and
// what its unit tests print before and after. It imports nothing of stem,
// so any package's tests can use it.
package demotask

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The task's unit tests (make test) print these: a failing check per bug
// case until the fix, then the all-clear.
const (
	FailingCheck = `FAIL count_words("tab\tseparated") = 1, want 2`
	Failed       = "2 check(s) failed"
	Passed       = "all checks passed"
)

const (
	buggy = "return c == ' ';"
	fixed = `return c == ' ' || c == '\t' || c == '\n';`
)

// Fix does the task as a student would: tabs and newlines become word
// separators in words.c of taskDir (the task's t1 directory).
func Fix(taskDir string) error {
	p := filepath.Join(taskDir, "words.c")
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("demo task: %w", err)
	}
	if !strings.Contains(string(b), buggy) {
		return fmt.Errorf("demo task: %s no longer has the bug %q", p, buggy)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("demo task: %w", err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), buggy, fixed, 1)), fi.Mode().Perm()); err != nil {
		return fmt.Errorf("demo task: %w", err)
	}
	return nil
}
