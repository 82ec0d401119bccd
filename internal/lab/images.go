package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rootImageID is the id of ref in root's Podman storage.
func rootImageID(ctx context.Context, ref string) (string, error) {
	id, err := root(ctx, nil, "podman", "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return "", fmt.Errorf("image %s is not in root's Podman (build it: make images): %w", ref, err)
	}
	return id, nil
}

// ensureImage puts root's image ref into the account's own Podman
// storage, unless the account has that very image already. Rootless
// Podman cannot use root's store (its files belong to ids outside the
// account's user namespace), so each account loads a copy.
func ensureImage(ctx context.Context, o *Options, a *Account, ref, id string) Step {
	st := Step{Account: a.Name, Name: "image " + ref}
	short := strings.TrimPrefix(id, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	if have, err := a.as(ctx, nil, "podman", "image", "inspect", "--format", "{{.Id}}", ref); err == nil && have == id {
		st.Result, st.Detail = Already, short
		return st
	}
	start := time.Now()
	archive, err := savedImage(ctx, o.CacheDir, ref, id)
	if err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	// The agent image is over a gigabyte: a loaded machine takes minutes.
	lctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if _, err := run(a.Command(lctx, "podman", "load", "-q", "-i", archive), nil); err != nil {
		st.Result, st.Detail = Failed, err.Error()
		return st
	}
	st.Result, st.Detail = Done, fmt.Sprintf("%s loaded in %.1f s", short, time.Since(start).Seconds())
	return st
}

// savedImage is the archive of root's image id in dir, saved on first
// use and kept for the next account. Images hold nothing secret: every
// account may read it.
func savedImage(ctx context.Context, dir, ref, id string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, strings.TrimPrefix(id, "sha256:")+".tar")
	if fi, err := os.Lstat(archive); err == nil && fi.Mode().IsRegular() {
		return archive, nil
	}
	tmp, err := os.CreateTemp(dir, ".save-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "save", "-q", ref)
	cmd.Stdout = tmp
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("podman save %s: %w: %s", ref, err, lastLine(stderr.String()))
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	return archive, os.Rename(tmp.Name(), archive)
}

// HasRootImage says whether root's Podman has ref.
func HasRootImage(ctx context.Context, ref string) bool {
	_, err := root(ctx, nil, "podman", "image", "exists", ref)
	return err == nil
}
