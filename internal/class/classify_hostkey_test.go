package class

import (
	"strings"
	"testing"
)

func TestExplainHostKey(t *testing.T) {
	t.Parallel()
	got := ExplainHostKey("anna@lab-03", 2222, 255, "Host key verification failed.\n")
	if !strings.Contains(got, "not in your known_hosts") || !strings.Contains(got, "ssh-keyscan -p 2222 lab-03 >> ~/.ssh/known_hosts") {
		t.Fatalf("unknown host key: %q", got)
	}
	if got := ExplainHostKey("anna@lab-03", 0, 255, "ssh: connect to host lab-03 port 22: Connection refused\n"); got != "" {
		t.Fatalf("another failure explained as the host key: %q", got)
	}
}
