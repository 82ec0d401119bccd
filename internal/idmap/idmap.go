// Package idmap decides which host uid a task container's root is.
//
// A container whose root were the student (rootless Podman's default) or
// root itself (rootful) would make files the host's git takes for the
// student's own: a repository the container plants in the card would run
// its hooks on the host. stem therefore maps the container's ids to a range
// of host ids nobody logs in as (the student's subordinate ids, rootless;
// a fixed range, rootful), so everything the container makes belongs to
// that uid, and git on the host refuses such repositories ("dubious
// ownership"). The container reaches the student's files through ACLs
// (internal/cardaccess).
package idmap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// RootfulBase is the first host id of a rootful container's range: above
// the subordinate ids useradd hands out (Debian: up to 600100000), below
// 2^31.
const RootfulBase = 2000000000

// Size is the number of ids a container gets (uid 0 to 65535, which holds
// the images' nobody, 65534).
const Size = 65536

// Map is a container's id mapping.
type Map struct {
	// EngineBase is where the container's id 0 goes as the engine counts
	// ids: the host's (rootful), or the account's own user namespace
	// (rootless, where 1 is its first subordinate id).
	EngineBase uint32 `json:"engine_base"`
	// Host and HostGID are the container root's ids on the host.
	Host    uint32 `json:"host"`
	HostGID uint32 `json:"host_gid"`
	Size    uint32 `json:"size"`
}

// Rootless says whether m is a rootless account's mapping (its engine
// counts ids in the account's own user namespace).
func (m Map) Rootless() bool { return m.EngineBase != m.Host }

// Files are where subordinate ids are read (tests point them elsewhere).
type Files struct{ SubUID, SubGID string }

// DefaultFiles are shadow-utils' files, which newuidmap reads too.
var DefaultFiles = Files{SubUID: "/etc/subuid", SubGID: "/etc/subgid"}

// ForCaller is the mapping for containers of the calling account: euid 0
// is rootful Podman; any other account runs rootless Podman.
func ForCaller() (Map, error) {
	if os.Geteuid() == 0 {
		return Map{EngineBase: RootfulBase, Host: RootfulBase, HostGID: RootfulBase, Size: Size}, nil
	}
	uid := strconv.Itoa(os.Geteuid())
	name := os.Getenv("USER")
	// An account only NSS knows (LDAP) is not found without cgo: the uid
	// and $USER still match its lines.
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	return Rootless(DefaultFiles, name, uid)
}

// Rootless is the mapping for an account's rootless containers: their
// root is the account's first subordinate id.
func Rootless(f Files, name, uid string) (Map, error) {
	us, un, err := subordinate(f.SubUID, name, uid)
	if err != nil {
		return Map{}, err
	}
	gs, gn, err := subordinate(f.SubGID, name, uid)
	if err != nil {
		return Map{}, err
	}
	return Map{EngineBase: 1, Host: us, HostGID: gs, Size: min(un, gn, Size)}, nil
}

// ErrNoSubordinate says the account has no subordinate ids.
var ErrNoSubordinate = errors.New("no subordinate ids")

// subordinate returns the start of the account's first range in file and
// the total count of its ranges (newuidmap maps them in file order).
func subordinate(file, name, uid string) (start, count uint32, err error) {
	fh, err := os.Open(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, fmt.Errorf("read %s: %w", file, err)
	}
	found := false
	if err == nil {
		defer fh.Close()
		start, count, found, err = parse(fh, name, uid)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", file, err)
		}
	}
	if !found || count < 2 {
		return 0, 0, fmt.Errorf("%w for %s in %s: stem runs your containers as one of them, so that nothing a container makes is yours on the host; ask an administrator to run `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s` (a range no other account uses; `stemctl doctor` names a free one)", ErrNoSubordinate, name, file, name)
	}
	return start, count, nil
}

func parse(r io.Reader, name, uid string) (start, count uint32, found bool, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(f) != 3 || f[0] == "" || (f[0] != name && f[0] != uid) {
			continue
		}
		s, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, false, fmt.Errorf("malformed line %q", sc.Text())
		}
		if !found {
			start, found = uint32(s), true
		}
		count += uint32(n)
	}
	return start, count, found, sc.Err()
}

// Check reads the uid_map of a container's process pid and says whether
// its root is m.Host (a container made before stem mapped ids, or by hand,
// is not).
func Check(pid int, m Map) error {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/uid_map")
	if err != nil {
		return fmt.Errorf("read the container's uid map: %w", err)
	}
	host, ok := RootOf(string(data))
	if !ok || host != m.Host {
		return fmt.Errorf("the container's root is host uid %d, not %d: it was not made by this stem", host, m.Host)
	}
	return nil
}

// RootOf returns the host id that id 0 maps to in a /proc/PID/uid_map.
func RootOf(uidMap string) (uint32, bool) {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		out, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil && err3 == nil && in == 0 && n > 0 {
			return uint32(out), true
		}
	}
	return 0, false
}
