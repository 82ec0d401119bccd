// Package runspec is what `stemctl agent start` (package agent, the
// launcher) and `stemctl agent run` (package supervisor) agree on: the
// spec the launcher writes into the agent's directory, the readiness lines
// the supervisor writes back on its pipe, the environment an agent runs
// with, and the prefix of the lines the supervisor types into a CLI, which
// the agent's context explains. Neither side links the other: each links
// this package.
//
// The spec lives in the agent's directory (package agentstore, mode
// 0700); the caller's own variables, credentials included, are never
// written into it.
package runspec

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// Spec is what the supervisor (`stemctl agent run`) runs: written by
// `stemctl agent start` as File in the agent's directory. The
// environment it adds to its own (the caller's, inherited) is listed here;
// the caller's own variables, credentials included, are never written down.
type Spec struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	// Adapter is the provider's adapter (claude, codex, gemini, custom):
	// it says how the CLI's screen shows that it is idle.
	Adapter  string            `json:"adapter,omitempty"`
	Instance string            `json:"instance"`
	Argv     []string          `json:"argv"`
	Env      map[string]string `json:"env"`
	WorkDir  string            `json:"workdir"`
	Socket   string            `json:"socket"`
	// RelayTimeout bounds the wait for the tmux window's relay.
	RelayTimeout time.Duration `json:"relay_timeout_ns"`
	// Grace is how long the agent lives on with no window connected (the
	// student closed it) before it gets SIGHUP, as from a closed terminal.
	Grace time.Duration `json:"grace_ns"`
	// Sandbox, when set, runs Argv in the agent's sandbox container
	// (WorkDir is then a path there).
	Sandbox *BoxSpec `json:"sandbox,omitempty"`
}

// BoxSpec is the sandbox part of a Spec: the container, and what the
// supervisor serves it from the host.
type BoxSpec struct {
	Container engine.Spec `json:"container"`
	// SocketUID is the sandbox user's host uid, which the sockets name in
	// an ACL when the sandbox has ids of its own (Container.IDMap);
	// otherwise they are given to Container.User.
	SocketUID int `json:"socket_uid,omitempty"`
	// Env is the CLI's environment in the sandbox (nothing of the
	// caller's but the variables named in KeyVars).
	Env map[string]string `json:"env"`
	// KeyVars name the caller's variables (credentials, model endpoints)
	// the CLI gets; their values are read by the supervisor when it
	// starts the CLI and never written down.
	KeyVars []string `json:"key_vars,omitempty"`
	// RunDir is the host directory of the sandbox's sockets.
	RunDir string `json:"run_dir"`
	// MCP is the host command served on the MCP socket (stem-mcp serve at
	// the agent's level, fixed to the instance).
	MCP []string `json:"mcp"`
	// Egress are the endpoints the proxy allows (egress.ParseRule).
	Egress []string `json:"egress"`
}

// File is the spec's name in the agent directory.
const File = "spec.json"

// StartTimeout bounds the wait for a CLI in its sandbox to show anything
// (Gemini CLI takes about 20 s here before its first screen).
const StartTimeout = 90 * time.Second

// EventPrefix starts every line the supervisor types into an agent's
// input; the agent's context explains it (data from stem, not the
// student's words).
const EventPrefix = "[stem event]"

// Environ returns base with the overrides applied (later maps win): base's
// variables that no override sets, in base's order, then the overridden
// ones sorted by name (not in map order, so the agent's environment is the
// same every time).
func Environ(base []string, overrides ...map[string]string) []string {
	set := map[string]string{}
	for _, m := range overrides {
		for k, v := range m {
			set[k] = v
		}
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return out
}
