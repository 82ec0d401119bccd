//go:build ignore

// genprompt rewrites the PromptIntegration constant in prompt.go from
// containers/files/shell/stem-prompt.sh: go generate ./internal/tmux
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

func main() {
	script, err := os.ReadFile("../../containers/files/shell/stem-prompt.sh")
	if err != nil {
		fail(err)
	}
	if bytes.IndexByte(script, '`') >= 0 {
		fail(fmt.Errorf("stem-prompt.sh holds a backquote; it cannot be a raw Go string"))
	}
	src, err := os.ReadFile("prompt.go")
	if err != nil {
		fail(err)
	}
	const marker = "const PromptIntegration = `"
	i := strings.Index(string(src), marker)
	if i < 0 {
		fail(fmt.Errorf("prompt.go: %q not found", marker))
	}
	out := string(src[:i]) + marker + string(script) + "`\n"
	if err := os.WriteFile("prompt.go", []byte(out), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "genprompt:", err)
	os.Exit(1)
}
