// Package sandbox is where `stemctl agent start` runs an agent CLI: a
// container of its own beside the student's, built from the same image
// family plus the agent CLIs (localhost/stem-agent), holding no more
// authority than the student's container plus the agent's access level.
//
// Threat model: the student's container is untrusted and can type into
// the agent's window (its tmux serves it), write the card, and plant the
// CLIs' project settings, hooks and instruction files there. Whatever that
// makes the agent CLI do happens here, not on the host:
//
//   - no network of its own (--network none): the only way out is the
//     host's egress proxy (package egress) on a Unix socket, which allows
//     the model API's endpoints and nothing else; a forwarder in the
//     sandbox serves it on a loopback port that HTTPS_PROXY names;
//   - stem is reachable only through a second Unix socket, where the host
//     runs `stem-mcp serve` at the agent's level for each connection: never
//     the instance's t.sock, n.sock or g.sock;
//   - the card is mounted read-only below full (edits go through stem, as
//     the level allows), read-write at full (the student's own rights)
//     but for its .git, a read-only mount point as in the student's
//     container (CardGit);
//     the CLIs' project settings in it (.claude, .codex, .gemini) are
//     hidden behind empty directories, and each adapter also tells its CLI
//     not to read them, so a hook planted there runs nowhere;
//   - the agent's files (context, the CLIs' configuration) are mounted
//     read-only; its home directory is its own and the host never reads it;
//   - the API key is in the CLI's environment in the sandbox only;
//   - the CLI and everything it starts run as AgentUID, not root, in the
//     sandbox (rootless, in a user namespace of the account's subordinate
//     ids, so that what it writes in the card is not the student's on the
//     host, as in the student's container: internal/idmap), with every capability
//     dropped, no-new-privileges (a setuid program gains nothing), no
//     namespaces or mounts of its own (seccomp), and the image read-only:
//     the only writable places are its home, a small /tmp in memory, and
//     the card at full.
package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stem-edu/stem/internal/engine"
	"github.com/stem-edu/stem/internal/idmap"
)

// MemoryMiB is the sandbox's memory limit unless Options says otherwise:
// node CLIs take a few hundred MiB each.
const MemoryMiB = 2048

// Paths inside the sandbox.
const (
	// Image is the sandbox image (scripts/build-images.sh agent).
	Image = "localhost/stem-agent:latest"
	// RunDir holds the host-served sockets (mounted read-only: connecting
	// needs no write access to the directory).
	RunDir = "/run/stem-agent"
	// ConfDir holds the agent's files: context, MCP and CLI settings.
	ConfDir = "/etc/stem-agent"
	// Home is the agent's home directory (its CLIs' state).
	Home = "/home/agent"
	// MCPBinary is where stem-mcp is mounted (as in the student's container).
	MCPBinary = "/opt/stem/bin/stem-mcp"
	// ProxyPort is the loopback port of the in-sandbox forwarder.
	ProxyPort = 3128
	// MCPSocket and EgressSocket are the sockets' names in RunDir.
	MCPSocket    = "mcp.sock"
	EgressSocket = "egress.sock"
)

// AgentUID is the sandbox user inside the sandbox: no account's uid on a
// usual host (it is "nonroot" in distroless images). Under rootful Podman
// run by root it is that host uid; rootless, the sandbox has the
// account's subordinate ids and AgentUID is the one at that offset.
const AgentUID = 65532

// TmpMiB is the size of the sandbox's /tmp (memory, counted in its limit).
const TmpMiB = 256

// Label marks sandbox containers; its value is the agent id.
const Label = "io.stem.agent"

// Options describe one agent's sandbox.
type Options struct {
	AgentID  string
	Instance string
	// CardPath is mounted at the same path; CardWritable at full only.
	CardPath     string
	CardWritable bool
	// ReadOnlyCardParts are paths below the card kept read-only even when
	// the card is writable (its .git, a mount point as in the student's
	// container).
	ReadOnlyCardParts []string
	WorkDir           string
	// HostRunDir, HostConfDir and HostHome are the host directories behind
	// RunDir, ConfDir and Home.
	HostRunDir, HostConfDir, HostHome string
	// HostMCPBinary is the host's static stem-mcp.
	HostMCPBinary string
	// Masked are directories below the card hidden in the sandbox behind
	// Empty (an empty read-only directory): the CLIs' project settings.
	Masked []string
	Empty  string
	// Programs are host files mounted read-only at the same path (a custom
	// provider's program).
	Programs  []string
	MemoryMiB int64
	Pids      int64
	// User is who the CLI runs as (Identify).
	User Identity
}

// Identity is the sandbox user.
type Identity struct {
	// UID and GID are the user's ids inside the sandbox.
	UID, GID int
	// HostUID is its uid on the host: what the card's and its home's
	// ACLs name when the sandbox has ids of its own.
	HostUID int
	// IDMap, when set, gives the sandbox a user namespace of its own.
	IDMap *engine.IDMap
}

// Identify is the sandbox user for a caller with effective uid euid:
// rootful, AgentUID itself; any other account runs rootless Podman, and
// the sandbox gets the account's subordinate ids (ids(), as the student's
// containers: internal/idmap).
func Identify(euid int, ids func() (idmap.Map, error)) (Identity, error) {
	if euid == 0 {
		return Identity{UID: AgentUID, GID: AgentUID, HostUID: AgentUID}, nil
	}
	m, err := ids()
	if err != nil {
		return Identity{}, err
	}
	if m.Size <= AgentUID {
		return Identity{}, fmt.Errorf("the agent sandbox runs as id %d of your %d subordinate ids: it needs at least %d (usermod --add-subuids, --add-subgids)", AgentUID, m.Size, AgentUID+1)
	}
	return Identity{UID: AgentUID, GID: AgentUID, HostUID: int(m.Host) + AgentUID,
		IDMap: &engine.IDMap{Base: m.EngineBase, Size: m.Size}}, nil
}

// ContainerName is the sandbox's container name for an agent.
func ContainerName(agentID string) string { return "stem-agent-" + agentID }

// Spec is the sandbox container. Its command is the egress forwarder; the
// CLI is started in it later (exec with a terminal) once the student's
// window is there.
func Spec(o Options) (engine.Spec, error) {
	for _, p := range []string{o.CardPath, o.HostRunDir, o.HostConfDir, o.HostHome, o.HostMCPBinary} {
		if !filepath.IsAbs(p) {
			return engine.Spec{}, fmt.Errorf("sandbox: path %q is not absolute", p)
		}
	}
	mounts := []engine.Mount{
		{Source: o.CardPath, Dest: o.CardPath, ReadOnly: !o.CardWritable},
		{Source: o.HostRunDir, Dest: RunDir, ReadOnly: true},
		{Source: o.HostConfDir, Dest: ConfDir, ReadOnly: true},
		{Source: o.HostHome, Dest: Home},
		{Source: o.HostMCPBinary, Dest: MCPBinary, ReadOnly: true},
	}
	if o.CardWritable {
		for _, p := range o.ReadOnlyCardParts {
			mounts = append(mounts, engine.Mount{Source: p, Dest: p, ReadOnly: true})
		}
	}
	for _, p := range o.Masked {
		mounts = append(mounts, engine.Mount{Source: o.Empty, Dest: p, ReadOnly: true})
	}
	for _, p := range o.Programs {
		if !filepath.IsAbs(p) {
			return engine.Spec{}, fmt.Errorf("sandbox: program %q is not absolute", p)
		}
		mounts = append(mounts, engine.Mount{Source: p, Dest: p, ReadOnly: true})
	}
	mem, pids := o.MemoryMiB, o.Pids
	if mem == 0 {
		mem = MemoryMiB
	}
	if pids == 0 {
		pids = 1024
	}
	if o.User.UID == 0 {
		return engine.Spec{}, fmt.Errorf("sandbox: the agent's user must not be root")
	}
	return engine.Spec{
		Name:  ContainerName(o.AgentID),
		Image: Image,
		Command: []string{MCPBinary, "agent-net", "--listen", "127.0.0.1:" + strconv.Itoa(ProxyPort),
			"--sock", filepath.Join(RunDir, EgressSocket)},
		Env:       map[string]string{"HOME": Home},
		Labels:    map[string]string{Label: o.AgentID, "io.stem.agent-instance": o.Instance},
		Mounts:    mounts,
		WorkDir:   o.WorkDir,
		MemoryMiB: mem,
		Pids:      pids,
		Network:   "none",
		Init:      true,
		User:      fmt.Sprintf("%d:%d", o.User.UID, o.User.GID),
		IDMap:     o.User.IDMap,
		// Nothing the CLI runs needs a capability or a setuid program;
		// its scratch space is its home and /tmp.
		DropAllCaps:     true,
		NoNewPrivileges: true,
		NoNewNamespaces: true,
		ReadOnlyRoot:    true,
		Tmpfs:           []engine.Tmpfs{{Dest: "/tmp", SizeMiB: TmpMiB}},
	}, nil
}

// ProxyEnv is the environment that sends the CLIs' HTTP through the
// forwarder, in both spellings (Node, Rust and Go read either).
func ProxyEnv() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	return map[string]string{
		"HTTPS_PROXY": u, "https_proxy": u, "HTTP_PROXY": u, "http_proxy": u,
		"ALL_PROXY": u, "NO_PROXY": "", "no_proxy": "",
	}
}

// DefaultEgress are the endpoints each adapter's CLI needs for its model
// with an API key: its API host. Configure others (a company gateway, a
// test model) with egress = [...] in agents.toml.
func DefaultEgress(adapter string) []string {
	switch adapter {
	case "claude":
		return []string{"api.anthropic.com:443"}
	case "codex":
		return []string{"api.openai.com:443"}
	case "gemini":
		return []string{"generativelanguage.googleapis.com:443"}
	}
	return nil
}

// KeyVars are the variables taken from the caller's environment into the
// CLI's environment in the sandbox (credentials and model endpoints), per
// adapter. Nothing else of the caller's environment goes in.
func KeyVars(adapter string) []string {
	switch adapter {
	case "claude":
		return []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"}
	case "codex":
		return []string{"OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"}
	case "gemini":
		return []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL"}
	}
	return nil
}

// Credentials are the KeyVars of adapter that carry a credential: the CLI
// in the sandbox can sign in with nothing else (a browser sign-in cannot
// reach it there).
func Credentials(adapter string) []string {
	switch adapter {
	case "claude":
		return []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}
	case "codex":
		return []string{"OPENAI_API_KEY", "CODEX_API_KEY"}
	case "gemini":
		return []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}
	}
	return nil
}

// CardGit is what of the card stays read-only when the sandbox may write
// it: its .git, bind-mounted at its own path as in the student's
// container (see internal/cardgit), so it can be neither written nor
// renamed or replaced. Keeping only .git/hooks and .git/config read-only,
// as sandboxes first did, left `mv .git x && cp -a x .git` and a hook of
// the sandbox's choosing in the copy, which git on the host then ran; the
// container can type into the agent's window. A symlink is left out (the
// instance refuses such a card).
func CardGit(card string) []string {
	p := filepath.Join(card, ".git")
	if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		return []string{p}
	}
	return nil
}
