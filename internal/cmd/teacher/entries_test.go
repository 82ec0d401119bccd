package teacher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/xdg"
)

// --class writes one entry that runs stem-mcp class for the roster, and
// keeps it apart from the students' entries.
func TestConfigClassEntry(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.home, ".config", "stem")
	e.f.Dirs = func() (xdg.Dirs, error) { return xdg.Dirs{Home: e.home, Config: cfg}, nil }
	bin := filepath.Join(e.home, "bin", "stem-mcp")
	e.f.MCPBinary = func() (string, error) { return bin, nil }
	codexHome := filepath.Join(e.home, "codex")
	e.vars["CODEX_HOME"] = codexHome

	if err := e.run(t, "config", "--provider", "codex", "--class", "lab3", "--write"); err == nil || !strings.Contains(err.Error(), "stemctl class init lab3") {
		t.Fatalf("no such class: %v", err)
	}
	if _, err := class.Init(context.Background(), cfg, "lab3", class.Settings{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // again: the same class's entry is updated in place
		if err := e.run(t, "config", "--provider", "codex", "--class", "lab3", "--write"); err != nil {
			t.Fatalf("%v\n%s", err, e.errOut)
		}
	}
	if !strings.Contains(e.errOut.String(), "class lab3 has no students yet") {
		t.Fatalf("stderr: %s", e.errOut)
	}
	var got struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
		} `toml:"mcp_servers"`
	}
	data, _ := os.ReadFile(filepath.Join(codexHome, "config.toml"))
	if _, err := toml.Decode(string(data), &got); err != nil {
		t.Fatal(err)
	}
	ent := got.MCPServers["stem-class-lab3"]
	if len(got.MCPServers) != 1 || ent.Command != bin || strings.Join(ent.Args, " ") != "class --class lab3" {
		t.Fatalf("config.toml:\n%s", data)
	}
	// The entry finds the roster whatever HOME or XDG_CONFIG_HOME the
	// agent CLI runs stem-mcp with.
	if ent.Env["STEM_CONFIG_DIR"] != cfg || ent.Env["HOME"] != e.home {
		t.Fatalf("the entry's env does not name the roster's directory:\n%s", data)
	}
	if err := e.run(t, "config", "--provider", "codex", "--class", "lab3", "--host", "anna@lab-03"); err == nil || !strings.Contains(err.Error(), "--class takes no --host") {
		t.Fatalf("--class with --host: %v", err)
	}
	// Another class does not silently take over its entry.
	class.Init(context.Background(), cfg, "lab4", class.Settings{})
	err := e.run(t, "config", "--provider", "codex", "--class", "lab4", "--name", "stem-class-lab3", "--write")
	if err == nil || !strings.Contains(err.Error(), `entry "stem-class-lab3" already reaches class lab3, not class lab4`) {
		t.Fatalf("another class over it: %v", err)
	}
}
