package cardgit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// helperArg is the first argument of stem's own binary when it only
// walks a container's root for Mounted (see Helper).
const helperArg = "__stem-git-mounted"

// Mounted checks that the container whose first process is pid sees
// want at card/.git: Podman resolved the mount source by path, so a .git
// swapped between Prepare and the container's start would be a different
// inode there. The card's path is walked in the container's root with no
// symlink followed.
//
// A container root on FUSE (rootless Podman's fuse-overlayfs, which a
// lab's shared image store needs) may be walked only from the user
// namespace that mounted it or one below: the host's refuses it
// (EACCES). The walk is then done again by this binary run (by nsenter)
// in rootless Podman's user namespace, the container's parent, where
// the container's processes have no privilege over it.
func Mounted(pid int, card string, want Identity) error {
	err := mountedIn(fmt.Sprintf("/proc/%d/root", pid), card, want)
	if !errors.Is(err, unix.EACCES) || os.Geteuid() == 0 {
		return err
	}
	if nerr := mountedInNS(pid, card, want); nerr != nil {
		return fmt.Errorf("%w; in Podman's user namespace: %v", err, nerr)
	}
	return nil
}

func mountedInNS(pid int, card string, want Identity) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return err
	}
	defer ns.Close()
	target := ns
	// Podman's namespace is the container's parent when the container
	// has its own id mapping (stem's), else the container's own.
	pfd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_PARENT)
	if err == nil {
		parent := os.NewFile(uintptr(pfd), "parent-userns")
		defer parent.Close()
		if !sameFile(parent, "/proc/self/ns/user") {
			target = parent
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--user=/proc/self/fd/3", "--preserve-credentials", "--",
		self, helperArg, strconv.Itoa(pid), card, want.Kind, strconv.FormatUint(want.Dev, 10), strconv.FormatUint(want.Ino, 10))
	cmd.ExtraFiles = []*os.File{target}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("nsenter: %w", err)
	}
	return nil
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// Helper does Mounted's walk and exits when this process was started
// for it; every stem binary that starts containers calls it first thing
// in main.
func Helper() {
	if len(os.Args) != 7 || os.Args[1] != helperArg {
		return
	}
	pid, err1 := strconv.Atoi(os.Args[2])
	dev, err2 := strconv.ParseUint(os.Args[5], 10, 64)
	ino, err3 := strconv.ParseUint(os.Args[6], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := mountedIn(fmt.Sprintf("/proc/%d/root", pid), os.Args[3], Identity{Kind: os.Args[4], Dev: dev, Ino: ino}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
