package cmdutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCompleteTarget(t *testing.T) {
	got, _ := CompleteTarget(0)(nil, []string{"rp2350"}, "")
	if len(got) != 2 || !strings.HasPrefix(got[0], "rp2350-rv\t") || !strings.HasPrefix(got[1], "rp2350-arm\t") {
		t.Fatalf("rp2350 targets: %q", got)
	}
	if got, _ := CompleteTarget(1)(nil, []string{"codex", "hazard3-sim"}, ""); len(got) != 1 || !strings.HasPrefix(got[0], "rv32\t") {
		t.Fatalf("agent start hazard3-sim targets: %q", got)
	}
	for _, args := range [][]string{nil, {"no-such-profile"}} {
		if got, _ := CompleteTarget(0)(nil, args, ""); len(got) != 0 {
			t.Fatalf("targets for %q: %q", args, got)
		}
	}
}

func TestDevicesUnder(t *testing.T) {
	dev := t.TempDir()
	for _, p := range []string{"serial/by-id/usb-Raspberry_Pi_Debug_Probe-if00", "ttyACM0", "ttyUSB1", "bus/usb/001/005", "tty0", "null"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dev, p)), 0o755)
		os.WriteFile(filepath.Join(dev, p), nil, 0o644)
	}
	got := devicesUnder(dev)
	want := []string{"serial/by-id/usb-Raspberry_Pi_Debug_Probe-if00", "ttyACM0", "ttyUSB1", "bus/usb/001/005"}
	for i := range want {
		want[i] = filepath.Join(dev, want[i])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("devices %q, want %q", got, want)
	}
}
