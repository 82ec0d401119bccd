package profiles

import (
	"strings"
	"testing"
)

func TestProfilesAreComplete(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "hazard3-sim,native-amd64,rp2350" {
		t.Fatalf("names %s", got)
	}
	for _, p := range every(t) {
		if p.Image != ImagePrefix+p.Name+":latest" || p.Stage == "" || p.Debugger == "" || p.Commands.Build == "" || p.Commands.Debug == "" {
			t.Errorf("%s is incomplete: %+v", p.Name, p)
		}
		if p.Limits.Network != "none" || p.Limits.MemoryMiB == 0 || p.Limits.Pids == 0 {
			t.Errorf("%s limits: %+v", p.Name, p.Limits)
		}
		if _, err := p.ResolveTarget(""); err != nil {
			t.Errorf("%s default target: %v", p.Name, err)
		}
	}
	rp, _ := Get("rp2350")
	if !rp.MultiTarget() || rp.Devices != ExplicitDevices {
		t.Fatal("rp2350 must have two targets and explicit devices")
	}
	for _, n := range []string{"native-amd64", "hazard3-sim"} {
		if p, _ := Get(n); p.Devices != NoDevices || p.MultiTarget() {
			t.Errorf("%s must take no devices and one target", n)
		}
	}
	h, _ := Get("hazard3-sim")
	if !strings.Contains(h.Commands.DebugProgram, "-S -gdb tcp:127.0.0.1:1234") || !strings.Contains(h.Commands.Debug, "127.0.0.1:1234") {
		t.Fatal("hazard3-sim's default debug layout must pair the halted simulator with gdb on the same port")
	}
}

func TestErrorsListChoices(t *testing.T) {
	if _, err := Get("hazard3"); err == nil || !strings.Contains(err.Error(), "hazard3-sim") {
		t.Fatalf("unknown profile: %v", err)
	}
	rp, _ := Get("rp2350")
	if _, err := rp.ResolveTarget("rp2040"); err == nil || !strings.Contains(err.Error(), "rp2350-arm") {
		t.Fatalf("unknown target: %v", err)
	}
}

func TestGetReturnsCopies(t *testing.T) {
	a, _ := Get("rp2350")
	a.Toolchain[0] = "mutated"
	a.Targets[0].Name = "mutated"
	if b, _ := Get("rp2350"); b.Toolchain[0] == "mutated" || b.Targets[0].Name == "mutated" {
		t.Fatal("Get exposes shared state")
	}
}

func TestHardwareRangesAreSane(t *testing.T) {
	for _, p := range every(t) {
		for i, r := range p.Hardware {
			if r.Lo > r.Hi || r.What == "" {
				t.Errorf("%s: range %d %+v", p.Name, i, r)
			}
			for _, o := range p.Hardware[i+1:] {
				if r.Lo <= o.Hi && o.Lo <= r.Hi {
					t.Errorf("%s: %q and %q overlap", p.Name, r.What, o.What)
				}
			}
		}
	}
}

// every is each profile, by Get.
func every(t *testing.T) []Profile {
	t.Helper()
	var out []Profile
	for _, n := range Names() {
		p, err := Get(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
