package procstat

import (
	"os"
	"testing"
)

func TestStart(t *testing.T) {
	self, err := Start(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("Start(self) = %d, %v", self, err)
	}
	if !Same(os.Getpid(), self) || Same(os.Getpid(), self+1) {
		t.Fatal("Same does not tell this process from another start time")
	}
}
