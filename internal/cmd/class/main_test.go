package class

import (
	"os"
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/testenv/student"
)

func TestMain(m *testing.M) {
	code := m.Run()
	student.Remove()
	testenv.RemoveBinaries()
	os.Exit(code)
}
