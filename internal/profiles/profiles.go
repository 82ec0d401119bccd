// Package profiles describes the three container environments as data: the
// image and Containerfile stage, toolchain, debugger, default task commands,
// resource limits and device policy. Nothing here talks to Podman.
package profiles

import (
	"fmt"
	"sort"
	"strings"
)

// DevicePolicy says which host devices may enter a container.
type DevicePolicy string

const (
	// NoDevices: no host device is ever passed in.
	NoDevices DevicePolicy = "none"
	// ExplicitDevices: only the device paths the user names with --device.
	ExplicitDevices DevicePolicy = "explicit"
)

// Limits are the resource limits applied to every container of a profile.
type Limits struct {
	MemoryMiB int64   `json:"memory_mib"`
	Pids      int64   `json:"pids"`
	CPUs      float64 `json:"cpus"`
	// Network is "none" (loopback only) for every profile: tasks never need
	// the network and a container with none cannot leak sockets outward.
	Network string `json:"network"`
}

// Target is one thing a profile can build for.
type Target struct {
	Name        string `json:"name"`
	Arch        string `json:"arch"`
	Description string `json:"description"`
	// Suffix is appended to the instance name when the profile has more than
	// one target, so rp2350 instances for RV and ARM never collide.
	Suffix string `json:"suffix"`
}

// Commands are the default task commands; a card's manifest overrides each.
type Commands struct {
	Build  string `json:"build"`
	Test   string `json:"test"`
	Run    string `json:"run"`
	Debug  string `json:"debug"`
	Deploy string `json:"deploy,omitempty"`
	// DebugProgram runs in the debug layout's program pane (a simulator
	// waiting for gdb); empty means the pane is the program's terminal.
	DebugProgram string `json:"debug_program,omitempty"`
}

// Profile is one container environment.
type Profile struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Stage       string       `json:"stage"` // stage name in containers/Containerfile
	Image       string       `json:"image"` // local image reference
	Toolchain   []string     `json:"toolchain"`
	Debugger    string       `json:"debugger"`
	Simulator   string       `json:"simulator,omitempty"`
	Targets     []Target     `json:"targets"`
	Default     string       `json:"default_target"`
	Commands    Commands     `json:"commands"`
	Limits      Limits       `json:"limits"`
	Devices     DevicePolicy `json:"device_policy"`
	// Hardware lists the address ranges where memory is device registers
	// (simulated or real): reading one can change the device (a UART's data
	// register pops a byte) and a breakpoint there is a register write, so
	// an agent below full may not name such an address.
	Hardware []AddrRange `json:"hardware_ranges,omitempty"`
	Notes    []string    `json:"notes,omitempty"`
}

// AddrRange is an inclusive address range.
type AddrRange struct {
	Lo   uint64 `json:"lo"`
	Hi   uint64 `json:"hi"`
	What string `json:"what"`
}

// ImagePrefix names the locally built images: localhost/stem-<profile>.
const ImagePrefix = "localhost/stem-"

var all = []Profile{
	{
		Name:        "native-amd64",
		Description: "native C on the host architecture: gcc, gdb, valgrind",
		Stage:       "native-amd64",
		Image:       ImagePrefix + "native-amd64:latest",
		Toolchain:   []string{"gcc", "make", "valgrind"},
		Debugger:    "gdb",
		Targets:     []Target{{Name: "amd64", Arch: "x86_64", Description: "the host CPU"}},
		Default:     "amd64",
		Commands: Commands{
			Build: "make",
			Test:  "make test",
			Run:   "make run",
			Debug: "gdb -q ./main",
		},
		Limits:  Limits{MemoryMiB: 1024, Pids: 512, CPUs: 1.5, Network: "none"},
		Devices: NoDevices,
	},
	{
		Name:        "hazard3-sim",
		Description: "RV32 (Hazard3-class) assembly and C in a simulator with a gdb stub",
		Stage:       "hazard3-sim",
		Image:       ImagePrefix + "hazard3-sim:latest",
		Toolchain:   []string{"riscv64-unknown-elf-gcc", "picolibc (rv32 multilib)", "make"},
		Debugger:    "gdb-multiarch",
		Simulator:   "qemu-system-riscv32",
		Targets:     []Target{{Name: "rv32", Arch: "riscv32", Description: "RV32IM on QEMU's virt machine"}},
		Default:     "rv32",
		Commands: Commands{
			Build: "make",
			Test:  "make test",
			Run:   "make run",
			Debug: "gdb-multiarch -q -ex 'target remote 127.0.0.1:1234' main.elf",
			// QEMU halted, its gdb stub on the container's loopback (the
			// container has no other network).
			DebugProgram: "qemu-system-riscv32 -M virt -cpu rv32 -nographic -bios none -kernel main.elf -S -gdb tcp:127.0.0.1:1234",
		},
		Limits:  Limits{MemoryMiB: 1024, Pids: 512, CPUs: 1.5, Network: "none"},
		Devices: NoDevices,
		// QEMU virt's devices (hw/riscv/virt.c memory map).
		Hardware: []AddrRange{
			{0x00100000, 0x00100fff, "the test finisher (a write ends QEMU)"},
			{0x02000000, 0x0200ffff, "the CLINT (timer and software interrupts)"},
			{0x0c000000, 0x0fffffff, "the PLIC"},
			{0x10000000, 0x10000fff, "the UART"},
		},
		Notes: []string{
			"QEMU's virt machine models a generic RV32 core, not Hazard3 itself: CSRs and timing specific to Hazard3 are not simulated.",
		},
	},
	{
		Name:        "rp2350",
		Description: "a physical Pico 2 / Pico 2 W: Hazard3 (RISC-V) or Cortex-M33 (ARM), OpenOCD, serial",
		Stage:       "rp2350",
		Image:       ImagePrefix + "rp2350:latest",
		Toolchain:   []string{"riscv64-unknown-elf-gcc", "arm-none-eabi-gcc", "openocd", "make"},
		Debugger:    "gdb-multiarch",
		Targets: []Target{
			{Name: "rp2350-rv", Arch: "riscv32", Description: "the RP2350's Hazard3 cores", Suffix: "rv"},
			{Name: "rp2350-arm", Arch: "armv8-m", Description: "the RP2350's Cortex-M33 cores", Suffix: "arm"},
		},
		Default: "rp2350-rv",
		Commands: Commands{
			Build:  "make",
			Test:   "make test",
			Run:    "make run",
			Debug:  "gdb-multiarch -q -ex 'target extended-remote 127.0.0.1:3333' main.elf",
			Deploy: "make deploy",
			// OpenOCD's gdb server for the probe named with --device.
			DebugProgram: "make gdbserver",
		},
		Limits:  Limits{MemoryMiB: 1024, Pids: 512, CPUs: 1.5, Network: "none"},
		Devices: ExplicitDevices,
		// RP2350 datasheet, address map.
		Hardware: []AddrRange{
			{0x40000000, 0x5fffffff, "the APB and AHB peripherals"},
			{0xd0000000, 0xdfffffff, "the SIO block"},
		},
		Notes: []string{
			"Only the USB device named with --device is passed into the container.",
			"Debian 12's OpenOCD 0.12 has no RP2350 support; build the image with OPENOCD_SOURCE pointing at an RP2350-capable OpenOCD (docs/profiles.md).",
		},
	},
}

// Names returns the profile names, sorted.
func Names() []string {
	n := make([]string, 0, len(all))
	for _, p := range all {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

// Get returns the named profile or an error listing the valid names.
func Get(name string) (Profile, error) {
	for _, p := range all {
		if p.Name == name {
			return clone(p), nil
		}
	}
	return Profile{}, fmt.Errorf("unknown profile %q: choose one of %s", name, strings.Join(Names(), ", "))
}

// ResolveTarget returns the target named by want, or the default when want is
// empty. An unknown target lists the profile's targets.
func (p Profile) ResolveTarget(want string) (Target, error) {
	if want == "" {
		want = p.Default
	}
	names := make([]string, 0, len(p.Targets))
	for _, t := range p.Targets {
		if t.Name == want {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return Target{}, fmt.Errorf("profile %s has no target %q: choose one of %s", p.Name, want, strings.Join(names, ", "))
}

// MultiTarget reports whether instance names must carry a target suffix.
func (p Profile) MultiTarget() bool { return len(p.Targets) > 1 }

func clone(p Profile) Profile {
	p.Toolchain = append([]string(nil), p.Toolchain...)
	p.Targets = append([]Target(nil), p.Targets...)
	p.Notes = append([]string(nil), p.Notes...)
	return p
}
