package student

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// imageCache keeps `podman save` archives of root's images between test
// processes, by image id: saving is a third of the cost of a load.
const imageCache = "/var/tmp/stem-test-images"

// load puts root's image ref into the student's storage, unless an image
// with the same id is there already. Each account has its own storage
// (files owned through its own subordinate ids), so the image is saved by
// root and loaded by the student: an additional image store made by root
// is not usable rootless (its files belong to ids outside the student's
// user namespace: the container cannot even create /etc/mtab).
func (s *Student) load(ref string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	id, err := output(exec.CommandContext(ctx, "podman", "image", "inspect", "--format", "{{.Id}}", ref))
	if err != nil {
		return fmt.Errorf("image %s (built? `make images`): %w", ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images[id] {
		return nil
	}
	if have, err := output(s.Command(ctx, "podman", "image", "inspect", "--format", "{{.Id}}", ref)); err == nil && have == id {
		s.images[id] = true
		return nil
	}
	archive, err := saved(ctx, ref, id)
	if err != nil {
		return err
	}
	if _, err := output(s.Command(ctx, "podman", "load", "-q", "-i", archive)); err != nil {
		return fmt.Errorf("load %s as %s: %w", ref, s.Name, err)
	}
	s.images[id] = true
	return nil
}

// saved returns the cached archive of image id, saving it first.
func saved(ctx context.Context, ref, id string) (string, error) {
	if err := os.MkdirAll(imageCache, 0o755); err != nil {
		return "", err
	}
	os.Chmod(imageCache, 0o755)
	archive := filepath.Join(imageCache, id+".tar")
	if fi, err := os.Stat(archive); err == nil && fi.Mode().IsRegular() {
		return archive, nil
	}
	tmp, err := os.CreateTemp(imageCache, ".save-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, "podman", "save", "-q", ref)
	cmd.Stdout = tmp
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("podman save %s: %v: %s", ref, err, strings.TrimSpace(stderr.String()))
	}
	os.Chmod(tmp.Name(), 0o644)
	return archive, os.Rename(tmp.Name(), archive)
}

func output(cmd *exec.Cmd) (string, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, lastLine(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
