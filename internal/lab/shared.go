package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Shared is the image store root fills and every account reads, so an
// image is on disk once rather than once per account. Root loads images
// with overlay's force_mask=shared: each file's owner and mode are kept
// in an xattr (user.containers.override_stat) and the files on disk are
// readable by all. An account reads the store as an additional image
// store and mounts its layers with fuse-overlayfs, which applies the
// xattr, so it needs /dev/fuse. The xattr keeps permission bits only:
// setuid, setgid and sticky bits do not survive, which stem's containers
// do not miss: everything in them runs as the container's root.
type Shared struct {
	// Root is the store (/var/lib/stem-shared/storage); RunRoot is its
	// run directory (/run/stem-shared).
	Root, RunRoot string
	// MountProgram is fuse-overlayfs (/usr/bin/fuse-overlayfs).
	MountProgram string
	// Fuse is the FUSE device (/dev/fuse).
	Fuse string
	// UdevRule makes Fuse 0666 at boot ("" for none), as Debian's own
	// rules do; some hosts make it 0600.
	UdevRule string
}

// DefaultShared is the store's place on a lab machine.
var DefaultShared = Shared{
	Root: "/var/lib/stem-shared/storage", RunRoot: "/run/stem-shared",
	MountProgram: "/usr/bin/fuse-overlayfs", Fuse: "/dev/fuse",
	UdevRule: "/etc/udev/rules.d/60-stem-fuse.rules",
}

const udevRule = "# stem: rootless Podman mounts the lab's shared images with fuse-overlayfs\nKERNEL==\"fuse\", MODE=\"0666\"\n"

// StorageConf is an account's storage.conf when it reads the store.
func (s *Shared) StorageConf() string {
	return fmt.Sprintf("[storage]\ndriver = \"overlay\"\n\n[storage.options]\nadditionalimagestores = [%q]\n\n[storage.options.overlay]\nmount_program = %q\n",
		s.Root, s.MountProgram)
}

// podman runs root's Podman on the shared store.
func (s *Shared) podman(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--root", s.Root, "--runroot", s.RunRoot, "--storage-driver", "overlay",
		"--storage-opt", "overlay.force_mask=shared", "--storage-opt", "overlay.mount_program=" + s.MountProgram}, args...)
	out, err := root(ctx, nil, "podman", full...)
	// Podman leaves its overlay directory bind-mounted on itself; a
	// lasting mount under /var/lib is of no use and confuses du and rm.
	s.unmount(ctx)
	return out, err
}

func (s *Shared) unmount(ctx context.Context) {
	dir := filepath.Join(s.Root, "overlay")
	for range 4 {
		if _, err := root(ctx, nil, "mountpoint", "-q", dir); err != nil {
			return
		}
		if _, err := root(ctx, nil, "umount", dir); err != nil {
			return
		}
	}
}

// fuseReady says why the accounts cannot mount the store ("" when they can).
func (s *Shared) fuseReady() string {
	fi, err := os.Stat(s.Fuse)
	switch {
	case err != nil:
		return s.Fuse + " is missing (modprobe fuse)"
	case fi.Mode()&os.ModeCharDevice == 0:
		return s.Fuse + " is not a character device"
	case fi.Mode().Perm()&0o666 != 0o666:
		return fmt.Sprintf("%s is %04o, not usable by the accounts (stemctl lab init makes it 0666)", s.Fuse, fi.Mode().Perm())
	}
	if fi, err := os.Stat(s.MountProgram); err != nil || fi.Mode().Perm()&0o001 == 0 {
		return s.MountProgram + " is not installed (apt-get install fuse-overlayfs)"
	}
	return ""
}

// EnsureFuse makes the FUSE device usable by every account, now and at
// boot.
func EnsureFuse(o *Options) Step {
	st := Step{Account: "system", Name: "fuse"}
	s := o.Shared
	if s == nil {
		st.Result, st.Detail = Skipped, "no shared store"
		return st
	}
	fi, err := os.Stat(s.Fuse)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		st.Result, st.Detail = Skipped, s.Fuse+" is missing or not a device (modprobe fuse): accounts keep their own images"
		return st
	}
	var did []string
	if perm := fi.Mode().Perm(); perm&0o666 != 0o666 {
		if err := os.Chmod(s.Fuse, 0o666); err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
		did = append(did, fmt.Sprintf("%s made 0666 (was %04o) so accounts can mount the shared images", s.Fuse, perm))
	}
	if s.UdevRule != "" {
		if have, err := os.ReadFile(s.UdevRule); err != nil || string(have) != udevRule {
			if _, err := os.Stat(filepath.Dir(s.UdevRule)); err == nil {
				if err := os.WriteFile(s.UdevRule, []byte(udevRule), 0o644); err != nil {
					st.Result, st.Detail = Failed, err.Error()
					return st
				}
				did = append(did, "kept at boot by "+s.UdevRule)
			}
		}
	}
	if _, err := os.Stat(s.MountProgram); err != nil {
		st.Result, st.Detail = Skipped, s.MountProgram+" is not installed (apt-get install fuse-overlayfs): accounts keep their own images"
		return st
	}
	if len(did) == 0 {
		st.Result, st.Detail = Already, s.Fuse+" is usable by every account"
		return st
	}
	st.Result, st.Detail = Done, strings.Join(did, ", ")
	return st
}

// EnsureSharedImage copies root's image ref (id) into the shared store,
// unless it is there. A previous image of the same name stays, untagged,
// for the containers made from it, until Prune.
//
// The copy goes from root's store to the shared one (containers-storage
// to containers-storage), which skips the layers the store has: an image
// rebuilt on the same layers costs its configuration only (0.1 s here,
// where podman save and load took 4 s of CPU each, whatever the store
// held). The source names the image by id as well, so a tag root moves
// meanwhile cannot put another image there.
func EnsureSharedImage(ctx context.Context, o *Options, ref, id string) Step {
	st := Step{Account: "system", Name: "shared image " + ref}
	s := o.Shared
	if have, err := s.podman(ctx, time.Minute, "image", "inspect", "--format", "{{.Id}}", ref); err == nil && have == id {
		st.Result, st.Detail = Already, shortID(id)+" in "+s.Root
		return st
	}
	start := time.Now()
	store, err := rootStore(ctx)
	if err == nil {
		_, err = s.podman(ctx, 20*time.Minute, "pull", "-q", "containers-storage:"+store+ref+"@"+strings.TrimPrefix(id, "sha256:"))
	}
	if err == nil {
		// Podman makes its directories root's 0700 (the store's parent
		// too); the accounts read them.
		err = searchable(filepath.Dir(s.Root))
	}
	if err == nil {
		_, err = root(ctx, nil, "chmod", "-R", "a+rX", s.Root)
	}
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, fmt.Sprintf("%s copied into %s in %.1f s", shortID(id), s.Root, time.Since(start).Seconds())
	return st
}

// rootStore is root's Podman store as a containers-storage reference
// names it: "[DRIVER@GRAPHROOT+RUNROOT]".
func rootStore(ctx context.Context) (string, error) {
	out, err := root(ctx, nil, "podman", "info", "--format", "{{.Store.GraphDriverName}}@{{.Store.GraphRoot}}+{{.Store.RunRoot}}")
	if err != nil {
		return "", fmt.Errorf("root's Podman store: %w", err)
	}
	if strings.ContainsAny(out, "[]\n") || !strings.Contains(out, "@/") || !strings.Contains(out, "+/") {
		return "", fmt.Errorf("root's Podman store: podman info said %q, not DRIVER@GRAPHROOT+RUNROOT", out)
	}
	return "[" + out + "]", nil
}

// searchable adds search and read permission for all to dir, taking
// nothing away (it may be a directory like /tmp).
func searchable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o055 != 0o055 {
		return os.Chmod(dir, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid)|0o055)
	}
	return nil
}

// sharedImages are the shared store's steps for the images: fuse first,
// then each image. why says why the accounts cannot use the store ("" when
// they can).
func sharedImages(ctx context.Context, o *Options, ids map[string]string) (steps []Step, why string) {
	if o.Shared == nil {
		return nil, "no shared store"
	}
	report := func(st Step) {
		steps = append(steps, st)
		if o.Progress != nil {
			o.Progress(st)
		}
	}
	report(locked(ctx, o, "system", "fuse", func() Step { return EnsureFuse(o) }))
	if why := o.Shared.fuseReady(); why != "" {
		return steps, why
	}
	for _, ref := range o.Images {
		st := locked(ctx, o, "system", "shared image "+ref, func() Step { return EnsureSharedImage(ctx, o, ref, ids[ref]) })
		report(st)
		if st.Result == Failed {
			why = "the shared store lacks " + ref
		}
	}
	return steps, why
}

// accountFuse says why the account cannot open the FUSE device ("" when
// it can): group rules or a nodev mount can stop it despite the mode.
func accountFuse(ctx context.Context, s *Shared, a *Account) string {
	if _, err := a.as(ctx, nil, "sh", "-c", `exec 3<>"$1"`, "sh", s.Fuse); err != nil {
		return a.Name + " cannot open " + s.Fuse
	}
	return ""
}

// Prune removes the shared store's images that no name points at and no
// container of the roster's accounts uses: the ones an update replaced.
func Prune(ctx context.Context, o *Options) Step {
	st := Step{Account: "system", Name: "prune shared store"}
	if o.Shared == nil {
		st.Result, st.Detail = Skipped, "no shared store"
		return st
	}
	rows, err := ReadRoster(o.Dir)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	used := map[string]bool{}
	for _, r := range rows {
		a, err := Lookup(r.Name)
		if err != nil {
			continue
		}
		out, err := a.as(ctx, nil, "podman", "ps", "-a", "--no-trunc", "--format", "{{.ImageID}}")
		if err != nil {
			// A container we cannot see may use any image: keep them all.
			st.Result, st.Detail = Failed, fmt.Sprintf("%s's containers: %v (nothing removed)", a.Name, err)
			return st
		}
		for _, id := range strings.Fields(out) {
			// Keyed by the short id, which every Podman format gives: a
			// truncated answer must not make an image look unused.
			used[shortID(id)] = true
		}
	}
	out, err := o.Shared.podman(ctx, time.Minute, "images", "--no-trunc", "--filter", "dangling=true", "--format", "{{.ID}}")
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	var removed, kept []string
	for _, id := range strings.Fields(out) {
		id = strings.TrimPrefix(id, "sha256:")
		if used[shortID(id)] {
			kept = append(kept, shortID(id))
			continue
		}
		if _, err := o.Shared.podman(ctx, 5*time.Minute, "rmi", id); err != nil {
			st.Result, st.Detail = Failed, err.Error()
			return st
		}
		removed = append(removed, shortID(id))
	}
	if len(removed) == 0 {
		st.Result = Already
	} else {
		st.Result = Done
	}
	st.Detail = fmt.Sprintf("removed %d (%s), kept %d in use (%s)", len(removed), strings.Join(removed, " "), len(kept), strings.Join(kept, " "))
	return st
}

// ensureSeen checks the account sees root's image ref (id) through the
// shared store. An older copy of its own, from before the store, hides
// the shared one and is removed (unless a container still uses it).
func ensureSeen(ctx context.Context, a *Account, ref, id string) Step {
	st := Step{Account: a.Name, Name: "image " + ref}
	have, err := a.as(ctx, nil, "podman", "image", "inspect", "--format", "{{.Id}}", ref)
	if err == nil && have == id {
		st.Result, st.Detail = Already, shortID(id)+" from the shared store"
		return st
	}
	if err == nil {
		if _, rerr := a.as(ctx, nil, "podman", "rmi", have); rerr != nil {
			st.Result, st.Detail = Failed, fmt.Sprintf("its own copy %s hides the shared %s: %v", shortID(have), shortID(id), rerr)
			return st
		}
		have, err = a.as(ctx, nil, "podman", "image", "inspect", "--format", "{{.Id}}", ref)
		if err == nil && have == id {
			st.Result, st.Detail = Done, "own copy removed; "+shortID(id)+" from the shared store"
			return st
		}
	}
	if err == nil {
		err = errors.New("it sees " + shortID(have))
	}
	st.Result, st.Detail = Failed, fmt.Sprintf("the shared %s is not visible: %v", shortID(id), err)
	return st
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
