package agentcli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/stem-edu/stem/internal/agent/sandbox"
	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/jsonwire"
	"github.com/stem-edu/stem/internal/mcpconfig"
)

// ServerName is the name of the stem MCP server in every agent's
// configuration.
const ServerName = "stem"

// Session is what an adapter needs to launch one agent.
type Session struct {
	ID       string
	Provider Provider
	// Binary is Provider.Command[0] resolved to a path.
	Binary   string
	Level    string
	Instance string
	// Server is the stem-mcp server the agent talks to.
	Server mcpconfig.Entry
	// Context is the task context as Markdown; ContextFile and
	// ContextJSON are where it is written.
	Context     string
	ContextFile string
	ContextJSON string
	// MCPConfig is the provider-neutral MCP configuration file
	// ({"mcpServers": {"stem": {...}}}).
	MCPConfig string
	// Dir is the agent's private directory (files go there).
	Dir      string
	CardPath string
	TaskDir  string
	// Extra are arguments from the command line (after --).
	Extra []string
	// Sandboxed: the CLI runs in the agent's sandbox (fresh home, API key
	// from the environment, no login of the user's but HostLogin).
	Sandboxed bool
	// HostLogin: in the sandbox the CLI signs in with a copy of its own
	// sign-in from the host (ReadHostLogin), not a key.
	HostLogin bool
	// Policy is the task's agent policy (nil: none); it also sets the
	// CLI's own permissions (policy.go).
	Policy *agentpolicy.Policy
}

// Launch is what to run for a session: the program and its arguments,
// variables added to the caller's environment, and files (paths relative to
// Session.Dir) to write before starting.
type Launch struct {
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env"`
	Files map[string][]byte `json:"-"`
}

// adapter is what stem knows about one kind of agent CLI: how to launch it
// with the stem MCP server and the context, and what to check about the
// account before anything is created.
type adapter struct {
	launch func(Session) (Launch, error)
	// checkConfig (may be nil) looks at the provider's configuration;
	// Precheck and Plan both run it.
	checkConfig func(Provider) error
	// checkRoot (may be nil) looks at the directory agents' files go to,
	// before anything exists.
	checkRoot func(agentsRoot string) error
}

func adapterFor(name string) (adapter, bool) {
	switch name {
	case AdapterCodex:
		return adapter{launch: codexLaunch}, true
	case AdapterClaude:
		return adapter{launch: claudeLaunch}, true
	case AdapterGemini:
		return adapter{launch: geminiLaunch, checkRoot: CheckSettingsDir}, true
	case AdapterCustom:
		return adapter{launch: customLaunch, checkConfig: checkPlaceholders}, true
	}
	return adapter{}, false
}

// Precheck runs the provider's adapter checks on its configuration and on
// the directory that will hold the agent's files.
func Precheck(p Provider, agentsRoot string) error {
	ad, ok := adapterFor(p.Adapter)
	if !ok {
		return fmt.Errorf("provider %s: unknown adapter %q", p.Name, p.Adapter)
	}
	if ad.checkConfig != nil {
		if err := ad.checkConfig(p); err != nil {
			return fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	if ad.checkRoot != nil {
		if err := ad.checkRoot(agentsRoot); err != nil {
			return fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	return nil
}

// Plan returns the launch for s: the common part (environment, the
// context and neutral MCP files) and the adapter's part.
func Plan(s Session) (Launch, error) {
	if err := s.Server.Validate(); err != nil {
		return Launch{}, err
	}
	neutral, err := mcpconfig.Gemini.Snippet(s.Server) // {"mcpServers":{NAME:{command,args,env}}}
	if err != nil {
		return Launch{}, err
	}
	l := Launch{
		Env: map[string]string{
			"STEM_AGENT":         s.Provider.Name,
			"STEM_MCP":           "1",
			"STEM_INSTANCE":      s.Instance,
			"STEM_AGENT_ID":      s.ID,
			"STEM_AGENT_LEVEL":   s.Level,
			"STEM_AGENT_CONTEXT": s.ContextFile,
			"STEM_MCP_CONFIG":    s.MCPConfig,
		},
		Files: map[string][]byte{
			rel(s.Dir, s.ContextFile): []byte(s.Context),
			rel(s.Dir, s.MCPConfig):   neutral,
		},
	}
	ad, ok := adapterFor(s.Provider.Adapter)
	if !ok {
		return Launch{}, fmt.Errorf("provider %s: unknown adapter %q", s.Provider.Name, s.Provider.Adapter)
	}
	if ad.checkConfig != nil {
		if err := ad.checkConfig(s.Provider); err != nil {
			return Launch{}, fmt.Errorf("provider %s: %w", s.Provider.Name, err)
		}
	}
	a, err := ad.launch(s)
	if err != nil {
		return Launch{}, err
	}
	l.Argv = a.Argv
	for k, v := range a.Env {
		l.Env[k] = v
	}
	for k, v := range a.Files {
		l.Files[k] = v
	}
	// The provider's own env from the configuration wins over nothing of
	// stem's: STEM_* stay as stem set them.
	for k, v := range s.Provider.Env {
		if _, ours := l.Env[k]; !ours {
			l.Env[k] = v
		}
	}
	return l, nil
}

func rel(dir, p string) string {
	r, err := filepath.Rel(dir, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return p
	}
	return r
}

// head is the program and the provider's leading arguments.
func head(s Session) []string {
	return append([]string{s.Binary}, s.Provider.Command[1:]...)
}

func tail(s Session) []string {
	return append(append([]string{}, s.Provider.Args...), s.Extra...)
}

// Codex: the server and the context as -c overrides of config.toml, so the
// user's own configuration (and its credentials) stay untouched. Codex
// 0.169 reads developer_instructions only as a value (model_instructions_file
// would replace Codex's own instructions), so the context is in argv:
// docs/agents.md says so.
func codexLaunch(s Session) (Launch, error) {
	key := "mcp_servers." + mcpconfig.TOMLKey(s.Server.Name)
	argv := head(s)
	argv = append(argv,
		"-c", key+".command="+mcpconfig.TOMLString(s.Server.Command),
		"-c", key+".args="+mcpconfig.TOMLArray(s.Server.Args),
		"-c", key+".env="+mcpconfig.TOMLInline(s.Server.Env),
		// task_action and pane_run may take up to 10 minutes; Codex's
		// default tool timeout is much shorter.
		"-c", key+".startup_timeout_sec=30",
		"-c", fmt.Sprintf("%s.tool_timeout_sec=%d", key, int(mcpconfig.ToolTimeout.Seconds())),
		"-c", "developer_instructions="+mcpconfig.TOMLString(s.Context),
	)
	if s.ownEditsOff() {
		// Shell commands and patches read only; stem's tools still act.
		argv = append(argv, "--sandbox", "read-only")
	}
	return Launch{Argv: append(argv, tail(s)...)}, nil
}

// Claude Code: --mcp-config with a file of its own format, the context
// file appended to the system prompt (--append-system-prompt-file, so the
// context is not in argv, where ps shows it to other users of the host).
func claudeLaunch(s Session) (Launch, error) {
	data, err := mcpconfig.Claude.Snippet(s.Server)
	if err != nil {
		return Launch{}, err
	}
	file := filepath.Join(s.Dir, "claude-mcp.json")
	// --mcp-config takes several files: the = form keeps it from eating
	// the next argument.
	argv := append(head(s), "--mcp-config="+file, "--append-system-prompt-file", s.ContextFile)
	if s.Sandboxed {
		// Only stem's server and the user layer of settings: the card's
		// .mcp.json, .claude/settings*.json (hooks, status line) are not
		// read even in the sandbox. stem's tools are allowed without a
		// prompt: the agent's level is what bounds them.
		argv = append(argv, "--strict-mcp-config", "--setting-sources", "user", "--allowedTools", "mcp__"+s.Server.Name)
	}
	switch {
	case s.Level == levels.Observe.String():
		argv = append(argv, "--permission-mode", "plan")
	case s.ownEditsOff():
		// Plan mode would also hold back stem's assist tools.
		argv = append(argv, "--disallowedTools", strings.Join(claudeWriteTools, ","))
	}
	return Launch{Argv: append(argv, tail(s)...), Files: map[string][]byte{"claude-mcp.json": data}}, nil
}

// GeminiDefaults is the settings file the Gemini adapter writes (relative to
// the agent directory) and GeminiContextDir the directory of its GEMINI.md.
const (
	GeminiDefaults   = "gemini/system-defaults.json"
	GeminiContextDir = "gemini/context"
)

// Gemini CLI: a system-defaults settings file (the lowest layer: the user's
// and the workspace's settings stay in force) naming the server and an
// include directory whose GEMINI.md is the context.
func geminiLaunch(s Session) (Launch, error) {
	ctxDir := filepath.Join(s.Dir, GeminiContextDir)
	settings := map[string]any{
		"mcpServers": map[string]any{s.Server.Name: geminiServer(s.Server, s.Sandboxed)},
		"context": map[string]any{
			"includeDirectories":               []string{ctxDir},
			"loadMemoryFromIncludeDirectories": true,
		},
	}
	if s.ownEditsOff() && s.Level != levels.Observe.String() {
		settings["tools"] = map[string]any{"exclude": geminiWriteTools}
	}
	if s.Sandboxed {
		// The sandbox has a fresh home: the way in is the key in
		// GEMINI_API_KEY (Gemini 0.61 otherwise takes
		// GOOGLE_GEMINI_BASE_URL for a "gateway" auth it then refuses),
		// or the copy of the host's Google sign-in.
		auth := "gemini-api-key"
		if s.HostLogin {
			auth = "oauth-personal"
		}
		settings["security"] = map[string]any{"auth": map[string]any{"selectedType": auth}}
		// The sandbox reaches only the model: usage statistics and the
		// update check would only be refused by its proxy, and the image
		// is never updated in place.
		settings["privacy"] = map[string]any{"usageStatisticsEnabled": false}
		settings["general"] = map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
	}
	data, err := jsonwire.Indent(settings)
	if err != nil {
		return Launch{}, err
	}
	argv := head(s)
	if s.Level == levels.Observe.String() {
		argv = append(argv, "--approval-mode", "plan")
	}
	return Launch{
		Argv: append(argv, tail(s)...),
		Env:  map[string]string{"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": filepath.Join(s.Dir, GeminiDefaults)},
		Files: map[string][]byte{
			GeminiDefaults: data,
			filepath.Join(GeminiContextDir, "GEMINI.md"): []byte(s.Context),
		},
	}, nil
}

// geminiServer is the server's settings entry; trusted (no prompt before
// each call) in the sandbox, where the agent's level bounds the tools.
func geminiServer(e mcpconfig.Entry, trusted bool) map[string]any {
	args := e.Args
	if args == nil {
		args = []string{}
	}
	// Gemini's default tool timeout (10 minutes) is the longest call's.
	m := map[string]any{"command": e.Command, "args": args, "timeout": mcpconfig.ToolTimeout.Milliseconds()}
	if trusted {
		m["trust"] = true
	}
	if len(e.Env) > 0 {
		m["env"] = e.Env
	}
	return m
}

// Placeholders a custom provider's command and args may use.
var Placeholders = []string{"{mcp_config}", "{context}", "{context_json}", "{instance}", "{level}", "{agent_id}", "{card}", "{task_dir}", "{stem_mcp}", "{home}"}

var placeholderRE = regexp.MustCompile(`\{[a-z_]+\}`)

// A custom provider gets everything in its environment and through
// placeholders in its command line.
func customLaunch(s Session) (Launch, error) {
	vals := map[string]string{
		"{mcp_config}": s.MCPConfig, "{context}": s.ContextFile, "{context_json}": s.ContextJSON,
		"{instance}": s.Instance, "{level}": s.Level, "{agent_id}": s.ID,
		"{card}": s.CardPath, "{task_dir}": s.TaskDir, "{stem_mcp}": s.Server.Command,
		"{home}": s.Dir,
	}
	if s.Sandboxed {
		vals["{home}"] = sandbox.Home
	}
	expand := func(a string) string {
		return placeholderRE.ReplaceAllStringFunc(a, func(m string) string { return vals[m] })
	}
	argv := []string{s.Binary}
	for _, a := range s.Provider.Command[1:] {
		argv = append(argv, expand(a))
	}
	for _, a := range s.Provider.Args {
		argv = append(argv, expand(a))
	}
	return Launch{Argv: append(argv, s.Extra...)}, nil
}

// checkPlaceholders refuses a custom command or args naming a placeholder
// stem does not know (a typo would reach the program verbatim).
func checkPlaceholders(p Provider) error {
	var bad []string
	for _, a := range append(append([]string{}, p.Command[min(1, len(p.Command)):]...), p.Args...) {
		for _, m := range placeholderRE.FindAllString(a, -1) {
			if !slices.Contains(Placeholders, m) {
				bad = append(bad, m)
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("unknown placeholder %s in its command (known: %s)", strings.Join(bad, ", "), strings.Join(Placeholders, " "))
	}
	return nil
}

// CheckSettingsDir refuses a directory with a group- or other-writable
// ancestor: Gemini CLI ignores settings files there (it checks every
// parent, sticky /tmp included).
func CheckSettingsDir(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil && fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("the agent directory %s lies under %s, which others can write (%v); Gemini CLI ignores settings files there: set XDG_RUNTIME_DIR to a private directory such as /run/user/$(id -u)", dir, d, fi.Mode())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
