// Package instance brings instances up and down: it turns a resolved task
// into a container spec with labels and a config hash, creates the socket
// directory for the new container id, starts the container, waits for tmux
// and nvim to answer, and keeps the registry and card state in step.
package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/cardgit"
	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/labels"
	"github.com/stem-edu/stem/internal/profiles"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/workspace"
)

// MCPMountPath is where the stem-mcp binary appears inside every container
// (read-only); the debugger layout runs its gdb bridge from there.
const MCPMountPath = "/opt/stem/bin/stem-mcp"

// SessionName is the tmux session the entrypoint creates.
const SessionName = "stem"

// Name returns the stable instance name: <profile>-<series>-<card>-t<task>,
// plus -<suffix> for profiles with several targets.
func Name(r *workspace.Resolved) string {
	n := fmt.Sprintf("%s-%s-%s-t%s", r.Profile.Name, r.Series, r.Card, r.TaskID)
	if r.Profile.MultiTarget() && r.Target.Suffix != "" {
		n += "-" + r.Target.Suffix
	}
	return n
}

// Plan is everything needed to create an instance's container.
type Plan struct {
	Name string
	// ContainerName is Name plus the workspace's thread key: Podman's
	// container names are global to the account (to the machine, rootful),
	// while instance names are only unique within one workspace.
	ContainerName string
	ThreadKey     string
	InstanceKey   string
	InstanceDir   string
	Spec          engine.Spec
	ConfigHash    string
	ImageID       string
	Resolved      *workspace.Resolved
	Devices       []string
	// RecordedDevices: Devices were taken from the record, not from --device.
	RecordedDevices bool
	// Git is the card's .git the container gets read-only, once known
	// (launch prepares a missing one); it goes into the record.
	Git cardgit.Identity
	// IDMap is the container's id mapping; nil: the engine's default.
	IDMap *idmap.Map
	// up is what the Up making this plan may do (not part of the hash).
	up UpOptions
}

// checkRecordedDevices re-checks devices taken from the record before a
// container is created with them.
func (p *Plan) checkRecordedDevices() error {
	if !p.RecordedDevices {
		return nil
	}
	if _, err := checkDevices(p.Resolved.Profile, p.Devices); err != nil {
		return fmt.Errorf("%w; the last `stemctl up --device` recorded it for %s: plug the board in, or remove the instance (stemctl rm %s) and bring it up again without --device", err, p.Name, p.Name)
	}
	return nil
}

// PlanOptions are the inputs besides the resolved task.
type PlanOptions struct {
	Layout    sockets.Layout
	ImageID   string
	MCPBinary string
	Devices   []string
	// RecordedDevices says Devices come from the instance's record (checked
	// when they were given): a reused container needs them only for its
	// config hash, so an unplugged board must not stop `stemctl build`.
	// They are checked again before a container is created with them.
	RecordedDevices bool
	// DigestCache caches the binary's digest (binaryIdentity); empty:
	// the user's DefaultDigestCache().
	DigestCache string
	// IDMap gives the container its own host ids (see internal/idmap);
	// nil keeps the engine's default.
	IDMap *idmap.Map
}

// NewPlan builds the container spec and its config hash.
func NewPlan(r *workspace.Resolved, opt PlanOptions) (*Plan, error) {
	name := Name(r)
	if opt.DigestCache == "" {
		opt.DigestCache = DefaultDigestCache()
	}
	var devices []string
	if opt.RecordedDevices {
		if r.Profile.Devices != profiles.NoDevices {
			devices = opt.Devices
		}
	} else {
		var err error
		if devices, err = checkDevices(r.Profile, opt.Devices); err != nil {
			return nil, err
		}
	}
	p := &Plan{
		Name:            name,
		ThreadKey:       sockets.ThreadKey(r.Workspace),
		InstanceKey:     sockets.InstanceKey(name),
		ImageID:         opt.ImageID,
		Resolved:        r,
		Devices:         devices,
		RecordedDevices: opt.RecordedDevices && len(devices) > 0,
	}
	p.ContainerName = name + "-" + p.ThreadKey
	p.InstanceDir = opt.Layout.InstanceDir(p.ThreadKey, p.InstanceKey)
	// Check the socket paths now, with a dummy id of the right length, so a
	// too-long runtime directory fails before anything is created.
	if _, err := opt.Layout.ForContainer(p.ThreadKey, p.InstanceKey, strings.Repeat("0", 64)); err != nil {
		return nil, err
	}
	env := map[string]string{
		"STEM_INSTANCE":     name,
		"STEM_INSTANCE_DIR": p.InstanceDir,
		"STEM_CARD_PATH":    r.CardPath,
		"STEM_TASK_DIR":     r.TaskDir,
		"STEM_PROFILE":      r.Profile.Name,
		"STEM_TARGET":       r.Target.Name,
		"STEM_SERIES":       r.Series,
		"STEM_CARD":         r.Card,
		"STEM_TASK":         r.TaskID,
		"STEM_MCP_BIN":      MCPMountPath,
	}
	if len(devices) > 0 {
		// STEM_DEVICE is the first (usually the probe); STEM_DEVICES all.
		env["STEM_DEVICE"] = devices[0]
		env["STEM_DEVICES"] = strings.Join(devices, " ")
	}
	lim := r.Profile.Limits
	p.Spec = engine.Spec{
		Name:  p.ContainerName,
		Image: r.Profile.Image,
		Env:   env,
		Labels: map[string]string{
			labels.Managed:   "true",
			labels.Instance:  name,
			labels.Profile:   r.Profile.Name,
			labels.Series:    r.Series,
			labels.Card:      r.Card,
			labels.Task:      r.TaskID,
			labels.Target:    r.Target.Name,
			labels.Schema:    labels.SchemaVersion,
			labels.Workspace: r.Workspace,
		},
		Mounts: []engine.Mount{
			{Source: r.CardPath, Dest: r.CardPath},
			// The instance directory, not the per-container one: Podman
			// checks bind sources at create time, before the id exists.
			// stemctl creates <instance-dir>/<cid12>/ between create and
			// start and removes every sibling, so the container only ever
			// sees its own directory.
			{Source: p.InstanceDir, Dest: p.InstanceDir},
			{Source: opt.MCPBinary, Dest: MCPMountPath, ReadOnly: true},
		},
		Devices:   devices,
		WorkDir:   r.TaskDir,
		MemoryMiB: lim.MemoryMiB,
		Pids:      lim.Pids,
		CPUs:      lim.CPUs,
		Network:   lim.Network,
		Init:      true,
	}
	if m := mapFor(opt.IDMap, devices); m != nil {
		p.IDMap = m
		p.Spec.IDMap = &engine.IDMap{Base: m.EngineBase, Size: m.Size}
	}
	// Before anything is created (the runtime directory, the container):
	// the card must not redirect stem's state writes.
	if err := checkCardState(r.CardPath, name); err != nil {
		return nil, err
	}
	gm, err := gitMount(r.CardPath)
	if err != nil {
		return nil, err
	}
	p.Spec.Mounts = append(p.Spec.Mounts, gm)
	hash, err := configHash(p.Spec, opt.ImageID, binaryIdentity(opt.DigestCache, opt.MCPBinary))
	if err != nil {
		return nil, err
	}
	p.ConfigHash = hash
	p.Spec.Labels[labels.ConfigHash] = hash
	return p, nil
}

// configHash digests everything that, when changed, requires a new
// container: the spec (minus the hash label itself), the image id, the
// schema, and the content of the mounted stem-mcp binary (its path alone
// would not do: a container keeps the file it was created with).
func configHash(spec engine.Spec, imageID, mcpIdentity string) (string, error) {
	spec.Labels = copyWithout(spec.Labels, labels.ConfigHash)
	data, err := json.Marshal(struct {
		Spec   engine.Spec
		Image  string
		Schema string
		MCP    string
	}{spec, imageID, labels.SchemaVersion, mcpIdentity})
	if err != nil {
		return "", fmt.Errorf("config hash: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

func copyWithout(m map[string]string, drop string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != drop {
			out[k] = v
		}
	}
	return out
}

// checkDevices applies the profile's device policy: none for profiles
// without hardware; for rp2350 only what the user named, each an existing
// character device under /dev (symlinks such as /dev/serial/by-id/... are
// resolved so the container gets exactly that node).
func checkDevices(p profiles.Profile, devs []string) ([]string, error) {
	if len(devs) == 0 {
		return nil, nil
	}
	if p.Devices == profiles.NoDevices {
		return nil, fmt.Errorf("profile %s takes no devices; --device is only for profiles with hardware (rp2350)", p.Name)
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range devs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("--device %q: give an absolute path such as /dev/ttyACM0", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--device %s does not exist: is the board plugged in? (its nodes appear as /dev/ttyACM*, /dev/serial/by-id/* and /dev/bus/usb/BUS/DEV)", d)
		}
		if err != nil {
			return nil, fmt.Errorf("--device %s cannot be resolved (%v): name the device node itself, e.g. /dev/ttyACM0", d, err)
		}
		if !strings.HasPrefix(real, "/dev/") {
			return nil, fmt.Errorf("--device %s resolves to %s, which is not under /dev", d, real)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("--device %s: %w", d, err)
		}
		if fi.Mode()&os.ModeCharDevice == 0 {
			return nil, fmt.Errorf("--device %s (%s) is not a character device", d, real)
		}
		if !usbDevice(fi) {
			return nil, fmt.Errorf("--device %s (%s) is not a USB device: only the debug probe's or the board's USB nodes may go into the container (/dev/ttyACM*, /dev/ttyUSB*, /dev/bus/usb/BUS/DEV, /dev/serial/by-id/*)", d, real)
		}
		if !seen[real] {
			seen[real] = true
			out = append(out, real)
		}
	}
	sort.Strings(out)
	return out, nil
}

// checkCardState refuses a card whose .stem/instances/<name> path holds a
// symlink or a non-directory where stem writes the instance's state.
// cardstate refuses it too, but only once the runtime directory exists.
func checkCardState(card, name string) error {
	cur := card
	for _, part := range []string{".stem", "instances", name} {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return nil // created later, as a real directory
		}
		if err != nil {
			return fmt.Errorf("card state %s: %w", cur, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return fmt.Errorf("refusing card %s: %s is a symlink or not a directory, and stem keeps the instance's state there; remove it (stem re-creates it as a directory)", card, cur)
		}
	}
	return nil
}

// USB character-device majors (Linux devices.txt): CDC ACM serial ports
// (the Pico's and the Debug Probe's UARTs), USB serial adapters, and raw USB
// devices (/dev/bus/usb/BUS/DEV, which OpenOCD's CMSIS-DAP driver opens).
const (
	majorACM       = 166
	majorUSBSerial = 188
	majorUSBDevice = 189
)

// usbDevice reports whether the character device fi is a USB device: one of
// the USB majors, or a node whose sysfs device sits on a USB bus (hidraw and
// other dynamically numbered drivers). /dev/mem, /dev/kmsg, a disk or a
// terminal never pass.
func usbDevice(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	major, minor := unix.Major(st.Rdev), unix.Minor(st.Rdev)
	switch major {
	case majorACM, majorUSBSerial, majorUSBDevice:
		return true
	}
	link, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/char/%d:%d", major, minor))
	return err == nil && strings.Contains(link, "/usb")
}

// gitMount returns the read-only mount of the card's .git at its own path
// (see internal/cardgit): a mount point the container cannot rename,
// replace, remove or write, so what git on the host finds at the card
// root is what the host made. A .git that is there must be a directory or
// a gitdir: file naming a directory outside the card; a missing one is
// made (empty) by launch, just before the container is created.
func gitMount(card string) (engine.Mount, error) {
	if _, err := cardgit.Inspect(card); err != nil && !errors.Is(err, os.ErrNotExist) {
		return engine.Mount{}, fmt.Errorf("refusing %w", err)
	} else if err == nil {
		if _, err := cardgit.GitDir(card); err != nil {
			return engine.Mount{}, fmt.Errorf("refusing %w", err)
		}
	}
	return engine.Mount{Source: cardgit.Path(card), Dest: cardgit.Path(card), ReadOnly: true}, nil
}
