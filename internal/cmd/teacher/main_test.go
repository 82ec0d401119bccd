package teacher

import (
	"os"
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBinaries()
	os.Exit(code)
}
