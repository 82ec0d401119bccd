package mcpserver

import (
	"strings"
	"testing"
)

// The refused ranges come from the profiles: QEMU virt's devices on
// hazard3-sim, the RP2350's peripherals on rp2350, nothing natively.
func TestHardwareAddressPerProfile(t *testing.T) {
	for _, c := range []struct {
		profile string
		addr    uint64
		refused string
	}{
		{"hazard3-sim", 0x10000000, "the UART"},
		{"hazard3-sim", 0x10000005, "the UART"},
		{"hazard3-sim", 0x00100000, "test finisher"},
		{"hazard3-sim", 0x0200bff8, "CLINT"},
		{"hazard3-sim", 0x0c200004, "PLIC"},
		{"hazard3-sim", 0x80000000, ""}, // RAM
		{"hazard3-sim", 0x40000000, ""},
		{"rp2350", 0x40070000, "peripherals"},
		{"rp2350", 0xd0000000, "SIO"},
		{"rp2350", 0x20000000, ""}, // SRAM
		{"rp2350", 0x10000000, ""}, // flash (XIP)
		{"native-amd64", 0x40070000, ""},
		{"native-amd64", 0x10000000, ""},
	} {
		err := hardwareAddress(c.profile, "the constant", c.addr)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s 0x%x refused: %v", c.profile, c.addr, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s 0x%x: %v, want a refusal naming %q", c.profile, c.addr, err, c.refused)
		}
	}
}
