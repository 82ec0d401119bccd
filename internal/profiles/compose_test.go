package profiles

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"
)

func containersDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "containers")
}

// The Compose file and the Containerfile are the profiles' other two
// descriptions: one service per profile, building that profile's stage into
// that profile's image, with no network, as stemctl runs them.
func TestComposeAndContainerfileMatchProfiles(t *testing.T) {
	dir := containersDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string `yaml:"image"`
			NetworkMode string `yaml:"network_mode"`
			Init        bool   `yaml:"init"`
			Build       struct {
				Context    string            `yaml:"context"`
				Dockerfile string            `yaml:"dockerfile"`
				Target     string            `yaml:"target"`
				Args       map[string]string `yaml:"args"`
			} `yaml:"build"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	cf, err := os.ReadFile(filepath.Join(dir, "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^FROM\s+\S+\s+AS\s+(\S+)\s*$`).FindAllStringSubmatch(string(cf), -1) {
		stages[m[1]] = true
	}
	var services []string
	for name := range compose.Services {
		services = append(services, name)
	}
	sort.Strings(services)
	want := Names()
	sort.Strings(want)
	if len(services) != len(want) {
		t.Fatalf("compose services %v, profiles %v", services, want)
	}
	for _, p := range every(t) {
		s, ok := compose.Services[p.Name]
		if !ok {
			t.Errorf("profile %s has no compose service", p.Name)
			continue
		}
		if s.Image != p.Image {
			t.Errorf("%s: compose image %q, profile image %q", p.Name, s.Image, p.Image)
		}
		if s.Build.Target != p.Stage || !stages[p.Stage] {
			t.Errorf("%s: compose target %q, profile stage %q, Containerfile stages %v", p.Name, s.Build.Target, p.Stage, stages)
		}
		if s.Build.Dockerfile != "Containerfile" || s.Build.Args["BASE_IMAGE"] == "" {
			t.Errorf("%s: build %+v", p.Name, s.Build)
		}
		if s.NetworkMode != "none" || !s.Init {
			t.Errorf("%s: network_mode %q init %v; stemctl runs it with no network and an init", p.Name, s.NetworkMode, s.Init)
		}
	}
}
