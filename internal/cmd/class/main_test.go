package class

import (
	"os"
	"testing"

	"github.com/stem-edu/stem/internal/class/standin"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	// As a student's forced command, the test binary is a hostile gate.
	if mode := os.Getenv("STEM_HOSTILE_GATE"); mode != "" {
		os.Exit(standin.Hostile(mode, os.Getenv("SSH_ORIGINAL_COMMAND"), os.Stdin, os.Stdout))
	}
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}
