package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"
)

// storageConf is the part of containers-storage.conf(5) a lab's account
// uses to read the shared image store.
type storageConf struct {
	Storage struct {
		Options struct {
			AdditionalImageStores []string `toml:"additionalimagestores"`
			Overlay               struct {
				MountProgram string `toml:"mount_program"`
			} `toml:"overlay"`
		} `toml:"options"`
	} `toml:"storage"`
}

// checkSharedStore checks the image stores the account reads besides its
// own (stemctl lab's shared store): each readable, and FUSE usable, since
// the account mounts their layers with fuse-overlayfs.
func checkSharedStore(e *Env) Result {
	r := Result{Name: "shared-store", Status: OK}
	data, err := os.ReadFile(e.StorageConf)
	if err != nil {
		r.Detail = "none: this account keeps its own images"
		return r
	}
	var c storageConf
	if _, err := toml.Decode(string(data), &c); err != nil {
		r.Status, r.Detail = Warn, fmt.Sprintf("%s: %v", e.StorageConf, err)
		r.Fix = "podman info (it says what it makes of " + e.StorageConf + ")"
		return r
	}
	stores := c.Storage.Options.AdditionalImageStores
	if len(stores) == 0 {
		r.Detail = "none: this account keeps its own images"
		return r
	}
	r.Required = true
	for _, s := range stores {
		f, err := os.Open(filepath.Join(s, "overlay-images", "images.json"))
		if err != nil {
			r.Status, r.Detail = Fail, fmt.Sprintf("the shared store %s is not readable: %v", s, err)
			r.Fix = e.asRoot("stemctl lab init (it fills the store and makes it readable)")
			return r
		}
		f.Close()
	}
	mp := c.Storage.Options.Overlay.MountProgram
	if mp == "" {
		r.Status, r.Detail = Fail, "the shared store's files carry their owners in an xattr only fuse-overlayfs applies, and "+e.StorageConf+" names no mount_program"
		r.Fix = "(as root) stemctl lab update " + e.User + " (it writes the storage.conf)"
		return r
	}
	if fi, err := os.Stat(mp); err != nil || fi.Mode().Perm()&0o001 == 0 {
		r.Status, r.Detail, r.Fix = Fail, mp+" is not installed", e.asRoot("apt-get install fuse-overlayfs")
		return r
	}
	fd, err := unix.Open(e.Fuse, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		mode := ""
		if fi, serr := os.Stat(e.Fuse); serr == nil {
			mode = fmt.Sprintf(" (mode %04o)", fi.Mode().Perm())
		}
		r.Status, r.Detail = Fail, fmt.Sprintf("cannot open %s%s: %v; fuse-overlayfs needs it", e.Fuse, mode, err)
		r.Fix = e.asRoot("chmod 0666 " + e.Fuse + "   (stemctl lab init does it and keeps it at boot)")
		return r
	}
	unix.Close(fd)
	r.Detail = fmt.Sprintf("images from %s, mounted with %s", strings.Join(stores, ", "), mp)
	return r
}
