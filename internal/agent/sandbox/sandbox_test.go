package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
)

func TestSpec(t *testing.T) {
	o := Options{AgentID: "abc123", Instance: "native-amd64-demo-hello-t1", CardPath: "/ws/demo/hello",
		ReadOnlyCardParts: []string{"/ws/demo/hello/.git"}, WorkDir: "/ws/demo/hello",
		HostRunDir: "/rt/agents/abc123/run", HostConfDir: "/rt/agents/abc123/box", HostHome: "/rt/agents/abc123/home",
		HostMCPBinary: "/usr/bin/stem-mcp", Masked: []string{"/ws/demo/hello/.claude"}, Empty: "/rt/agents/abc123/empty",
		User: Identity{UID: AgentUID, GID: AgentUID, HostUID: 100000 + AgentUID, IDMap: &engine.IDMap{Base: 1, Size: 65536}}}
	s, err := Spec(o)
	if err != nil {
		t.Fatal(err)
	}
	if s.Network != "none" || s.Name != "stem-agent-abc123" || s.Labels[Label] != "abc123" || s.Image != Image || s.MemoryMiB == 0 || s.Pids == 0 {
		t.Fatalf("spec %+v", s)
	}
	if s.User != "65532:65532" || s.IDMap == nil || s.IDMap.Base != 1 || !s.DropAllCaps || !s.NoNewPrivileges || !s.NoNewNamespaces || !s.ReadOnlyRoot ||
		len(s.Tmpfs) != 1 || s.Tmpfs[0].Dest != "/tmp" || s.Tmpfs[0].Exec {
		t.Fatalf("hardening: %+v", s)
	}
	if !slices.Equal(s.Command, []string{MCPBinary, "agent-net", "--listen", "127.0.0.1:3128", "--sock", "/run/stem-agent/egress.sock"}) {
		t.Fatalf("command %q", s.Command)
	}
	ro := map[string]bool{}
	for _, m := range s.Mounts {
		ro[m.Dest] = m.ReadOnly
		if strings.Contains(m.Source, "/stem/") && !strings.HasPrefix(m.Source, "/rt/agents/") {
			t.Errorf("mount of a stem runtime directory: %+v", m)
		}
	}
	for dest, want := range map[string]bool{"/ws/demo/hello": true, RunDir: true, ConfDir: true, Home: false, MCPBinary: true, "/ws/demo/hello/.claude": true} {
		if got, ok := ro[dest]; !ok || got != want {
			t.Errorf("mount %s: present %v, read-only %v (want %v)", dest, ok, got, want)
		}
	}
	if _, ok := ro["/ws/demo/hello/.git"]; ok {
		t.Errorf("git internals mounted over a read-only card")
	}
	o.CardWritable = true
	s, _ = Spec(o)
	for _, m := range s.Mounts {
		if m.Dest == "/ws/demo/hello" && m.ReadOnly || m.Dest == "/ws/demo/hello/.git" && !m.ReadOnly {
			t.Errorf("full: %+v", m)
		}
	}
	o.User = Identity{UID: AgentUID, GID: AgentUID, HostUID: AgentUID}
	if s, _ = Spec(o); s.User != "65532:65532" || s.IDMap != nil {
		t.Errorf("rootful: user %q, id map %+v", s.User, s.IDMap)
	}
	o.User.UID = 0
	if _, err := Spec(o); err == nil {
		t.Error("a root sandbox user was accepted")
	}
	o.User.UID = AgentUID
	o.CardPath = "relative"
	if _, err := Spec(o); err == nil {
		t.Error("a relative card path was accepted")
	}
}

func TestIdentify(t *testing.T) {
	ids := func(m idmap.Map, err error) func() (idmap.Map, error) {
		return func() (idmap.Map, error) { return m, err }
	}
	if u, err := Identify(0, nil); err != nil || u != (Identity{UID: AgentUID, GID: AgentUID, HostUID: AgentUID}) {
		t.Errorf("root: %+v %v", u, err)
	}
	u, err := Identify(1001, ids(idmap.Map{EngineBase: 1, Host: 100000, HostGID: 100000, Size: 65536}, nil))
	if err != nil || u.UID != AgentUID || u.HostUID != 100000+AgentUID || u.IDMap == nil || *u.IDMap != (engine.IDMap{Base: 1, Size: 65536}) {
		t.Errorf("a student: %+v %v", u, err)
	}
	if _, err := Identify(1001, ids(idmap.Map{EngineBase: 1, Host: 100000, Size: 1000}, nil)); err == nil || !strings.Contains(err.Error(), "at least 65533") {
		t.Errorf("too few subordinate ids: %v", err)
	}
	if _, err := Identify(1001, ids(idmap.Map{}, idmap.ErrNoSubordinate)); !errors.Is(err, idmap.ErrNoSubordinate) {
		t.Errorf("no subordinate ids: %v", err)
	}
}

func TestProxyEnvAndDefaults(t *testing.T) {
	env := ProxyEnv()
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if env[k] != "http://127.0.0.1:3128" {
			t.Errorf("%s = %q", k, env[k])
		}
	}
	if env["NO_PROXY"] != "" {
		t.Errorf("NO_PROXY must be empty: loopback in the sandbox is the forwarder only")
	}
	for _, a := range []string{"claude", "codex", "gemini"} {
		if len(DefaultEgress(a)) == 0 || len(KeyVars(a)) == 0 {
			t.Errorf("%s: no default egress or key variables", a)
		}
	}
	if DefaultEgress("custom") != nil {
		t.Error("a custom provider gets no endpoint by default")
	}
}

// CardGit keeps the card's .git itself read-only (a directory, or the
// gitdir: file of a linked worktree), never a symlink's target.
func TestCardGit(t *testing.T) {
	card := t.TempDir()
	if got := CardGit(card); got != nil {
		t.Errorf("no .git: %v", got)
	}
	git := filepath.Join(card, ".git")
	if err := os.Mkdir(git, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := CardGit(card); !slices.Equal(got, []string{git}) {
		t.Errorf("directory: %v", got)
	}
	os.Remove(git)
	if err := os.WriteFile(git, []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CardGit(card); !slices.Equal(got, []string{git}) {
		t.Errorf("gitdir file: %v", got)
	}
	os.Remove(git)
	if err := os.Symlink(t.TempDir(), git); err != nil {
		t.Fatal(err)
	}
	if got := CardGit(card); got != nil {
		t.Errorf("symlink: %v", got)
	}
}
