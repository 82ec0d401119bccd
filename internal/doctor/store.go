package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"github.com/stem-edu/stem/internal/idmap"
)

// OwnStorageConf is the storage.conf of a rootless account that keeps its
// own images, for stem's mapping m of its containers' ids. Podman stores
// a layer as the ids of its store's mapping: with stem's mapping there,
// an image is unpacked as those ids when it is loaded, and a container's
// first start uses its layers as they are. Without it Podman copies the
// whole image for the mapping on the image's first container (several
// seconds, and the image's size again on disk). overlay, because Podman
// 4.3 may pick vfs, which copies the whole image for every container.
func OwnStorageConf(m idmap.Map) string {
	ids := remap(m)
	return fmt.Sprintf("[storage]\ndriver = \"overlay\"\n\n[storage.options]\nremap-uids = %q\nremap-gids = %q\n", ids, ids)
}

// remap is m as containers-storage.conf(5) writes a mapping: container
// id, id in the account's user namespace, count.
func remap(m idmap.Map) string {
	return fmt.Sprintf("0:%d:%d", m.EngineBase, m.Size)
}

// readStorageConf parses the account's storage.conf (ok false when it
// has none).
func readStorageConf(e *Env) (c storageConf, ok bool, err error) {
	data, err := os.ReadFile(e.StorageConf)
	if err != nil {
		return c, false, nil
	}
	if _, err := toml.Decode(string(data), &c); err != nil {
		return c, true, fmt.Errorf("%s: %w", e.StorageConf, err)
	}
	return c, true, nil
}

// checkImageIDs checks that a rootless account's own image store holds
// images as its containers' ids, so no container waits for a copy.
func checkImageIDs(e *Env) Result {
	r := Result{Name: "image-ids", Status: OK}
	if !e.Rootless() {
		r.Detail = "rootful: images are used as stored"
		return r
	}
	m, err := idmap.Rootless(e.SubIDs, e.User, strconv.Itoa(e.UID))
	if err != nil {
		r.Detail = "see subordinate-ids"
		return r
	}
	c, ok, err := readStorageConf(e)
	if err != nil {
		r.Status, r.Detail = Warn, err.Error()
		r.Fix = "podman info (it says what it makes of " + e.StorageConf + ")"
		return r
	}
	o := c.Storage.Options
	if ok && len(o.AdditionalImageStores) > 0 {
		r.Detail = "shared store: fuse-overlayfs maps the ids, no copy"
		return r
	}
	want := remap(m)
	if o.RemapUIDs == want && o.RemapGIDs == want {
		r.Detail = "images are stored as the containers' ids " + want
		return r
	}
	r.Status = Warn
	r.Detail = fmt.Sprintf("%s does not store images as the containers' ids (remap-uids and remap-gids %q): the first stemctl up of each image waits several seconds while Podman copies it, and the copy takes its size again on disk", e.StorageConf, want)
	fix := strings.ReplaceAll(strings.TrimSpace(OwnStorageConf(m)), "\n", `\n`)
	fix = strings.ReplaceAll(fix, `"`, `\"`)
	r.Fix = fmt.Sprintf(`printf "%s\n" > %s   (an image loaded before still gets Podman's copy on its first container, one loaded after none; or, as root, stemctl lab update %s writes it)`, fix, e.StorageConf, e.User)
	return r
}

// storageConf is the part of containers-storage.conf(5) a lab's account
// uses to read the shared image store.
type storageConf struct {
	Storage struct {
		Options struct {
			AdditionalImageStores []string `toml:"additionalimagestores"`
			RemapUIDs             string   `toml:"remap-uids"`
			RemapGIDs             string   `toml:"remap-gids"`
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
	c, ok, err := readStorageConf(e)
	if !ok {
		r.Detail = "none: this account keeps its own images"
		return r
	}
	if err != nil {
		r.Status, r.Detail = Warn, err.Error()
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
