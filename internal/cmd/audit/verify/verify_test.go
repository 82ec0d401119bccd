package verify_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	auditshow "github.com/stem-edu/stem/internal/cmd/audit/show"
	"github.com/stem-edu/stem/internal/cmd/audit/verify"
	mcpselect "github.com/stem-edu/stem/internal/cmd/mcp/select"
	"github.com/stem-edu/stem/internal/cmd/up"
	"github.com/stem-edu/stem/internal/cmdutil/cmdtest"
)

const inst = "native-amd64-demo-hello-t1"

// TestShowAndVerify: a select is audited; show lists it, verify finds the
// chain intact; a line changed afterwards breaks the chain and verify
// says where.
func TestShowAndVerify(t *testing.T) {
	t.Parallel()
	w := cmdtest.New(t)
	if err := w.Run(up.NewCmdUp(w.F, nil), "native-amd64", "demo", "hello", "1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(mcpselect.NewCmdSelect(w.F, nil), inst); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(auditshow.NewCmdShow(w.F, nil)); err != nil || !strings.Contains(w.Out.String(), "select") || !strings.Contains(w.Out.String(), inst) {
		t.Fatalf("show: %v\n%s", err, w.Out)
	}
	if err := w.Run(verify.NewCmdVerify(w.F, nil)); err != nil || !strings.Contains(w.Out.String(), "chain intact, 1 lines") {
		t.Fatalf("verify: %v\n%s", err, w.Out)
	}
	log := filepath.Join(w.Dirs.State, "audit.jsonl")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	forged := bytes.Replace(data, []byte(`"select"`), []byte(`"revoke"`), 1)
	if bytes.Equal(forged, data) {
		t.Fatalf("no select entry to change:\n%s", data)
	}
	if err := os.WriteFile(log, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(verify.NewCmdVerify(w.F, nil)); err == nil {
		t.Fatalf("verify of a changed log passed:\n%s", w.Out)
	}
	if out := w.Out.String() + w.ErrOut.String(); !strings.Contains(out, "chain broken at line 1: the line's content does not match its hash") {
		t.Fatalf("verify does not say which line: %s", out)
	}
}
