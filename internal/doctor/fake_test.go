package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
)

// fakeEngine is the engine the checks see: images by reference, and
// errors to give from Create and Start. It records what was created and
// removed.
type fakeEngine struct {
	images              map[string]engine.Image
	createErr, startErr error
	created             []engine.Spec
	removed             []string
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string) (engine.Image, error) {
	if img, ok := f.images[ref]; ok {
		return img, nil
	}
	return engine.Image{}, fmt.Errorf("image %s: %w", ref, engine.ErrNotFound)
}

func (f *fakeEngine) Create(_ context.Context, s engine.Spec) (string, error) {
	if f.createErr != nil {
		return "", f.createErr
	}
	f.created = append(f.created, s)
	return "c" + s.Name, nil
}

func (f *fakeEngine) Start(context.Context, string) error { return f.startErr }

func (f *fakeEngine) Remove(_ context.Context, id string, _ bool) error {
	f.removed = append(f.removed, id)
	return nil
}

var testImages = []Image{
	{Name: "native-amd64", Ref: "localhost/stem-native-amd64:latest", Label: "io.stem.profile", Value: "native-amd64"},
	{Name: "rp2350", Ref: "localhost/stem-rp2350:latest", Label: "io.stem.profile", Value: "rp2350"},
	{Name: "agent", Ref: "localhost/stem-agent:latest", Label: "io.stem.role", Value: "agent-sandbox", Agent: true},
}

func stemImage(label, value string) engine.Image {
	return engine.Image{ID: "sha256:0123456789abcdef", Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Labels: map[string]string{label: value}}
}

// fakeEnv is a rootless account "stu" (uid 1234) whose files live in a
// temporary directory: subordinate ids, a runtime directory (0700), a
// workspace with the example cards, every image, git identity.
func fakeEnv(t *testing.T) (*Env, *fakeEngine) {
	t.Helper()
	dir := t.TempDir()
	e := &Env{
		User: "stu", UID: 1234, GID: 1234, Home: dir,
		Runtime:   filepath.Join(dir, "run"),
		Workspace: filepath.Join(dir, "ws"),
		SubIDs:    idmap.Files{SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid")},
		LingerDir: filepath.Join(dir, "linger"), SystemdDir: filepath.Join(dir, "systemd"),
		CgroupRoot: filepath.Join(dir, "cgroup"),
		Images:     testImages,
		LookPath:   func(p string) (string, error) { return "/usr/bin/" + p, nil },
		Now:        func() time.Time { return time.Unix(1, 0) },
		MCP:        func() (string, error) { return "/usr/bin/stem-mcp", nil },
	}
	e.Output = func(_ context.Context, name string, args ...string) (string, error) {
		switch {
		case name == "podman":
			return "4.3.1|overlay|v2|runc\n", nil
		case name == "git" && args[2] == "user.name":
			return "Stu Dent\n", nil
		case name == "git":
			return "stu@example.org\n", nil
		}
		return "", errors.New("unexpected " + name)
	}
	writeFile(t, e.SubIDs.SubUID, "other:100000:65536\nstu:165536:65536\n")
	writeFile(t, e.SubIDs.SubGID, "other:100000:65536\nstu:165536:65536\n")
	e.StorageConf = filepath.Join(dir, "storage.conf")
	writeFile(t, e.StorageConf, OwnStorageConf(idmap.Map{EngineBase: 1, Host: 165536, HostGID: 165536, Size: 65536}))
	if err := os.Mkdir(e.Runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	// The runtime directory must be the account's own.
	if os.Geteuid() == 0 {
		if err := os.Chown(e.Runtime, e.UID, e.GID); err != nil {
			t.Fatal(err)
		}
	} else {
		e.UID = os.Geteuid()
	}
	writeFile(t, filepath.Join(e.Workspace, "demo", "hello", "stem.toml"), minimalCard)
	fe := &fakeEngine{images: map[string]engine.Image{}}
	for _, img := range testImages {
		fe.images[img.Ref] = stemImage(img.Label, img.Value)
	}
	e.Connect = func(context.Context) (Engine, Service, error) {
		return fe, Service{URI: "unix:///fake.sock", Version: "4.3.1"}, nil
	}
	return e, fe
}

const minimalCard = `schema = 1
title = "t"

[[tasks]]
id = "1"
title = "one"
profiles = ["native-amd64"]
`

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// find returns the named result, failing the test when it is absent.
func find(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no check %q in %+v", name, rs)
	return Result{}
}
