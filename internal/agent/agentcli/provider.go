// Package agentcli is the catalogue of agent CLIs stem can launch (Codex,
// Claude Code, Gemini CLI, or any command): providers are data (a command,
// extra arguments, what to install) read from the built-ins and agents.toml,
// plus a small adapter per kind of CLI that knows how it takes an MCP server
// and a context file, and turns a Session into the Launch to run. Nothing
// outside the adapters knows any vendor's flags; package agent launches and
// supervises what Plan returns, and `stemctl agent providers` lists the
// catalogue without linking either.
package agentcli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/stem-edu/stem/internal/egress"
	"github.com/stem-edu/stem/internal/lib/tomlmsg"
)

// Provider is one agent CLI as configured.
type Provider struct {
	Name string `json:"name"`
	// Adapter is how the CLI takes the MCP server and the context: codex,
	// claude, gemini or custom.
	Adapter string `json:"adapter"`
	// Command is the program and its leading arguments; Command[0] is looked
	// up in PATH unless it contains a slash. For custom providers, the
	// placeholders listed in Placeholders are replaced in every element.
	Command []string `json:"command"`
	// Args are appended after stem's own arguments (model choice, ...).
	Args []string `json:"args,omitempty"`
	// Env is added to the agent's environment.
	Env map[string]string `json:"env,omitempty"`
	// Install says how to get the program when it is missing.
	Install string `json:"install,omitempty"`
	// Egress are the endpoints (HOST:PORT) the agent's sandbox may reach:
	// its model API. Empty: the adapter's default (sandbox.DefaultEgress).
	Egress []string `json:"egress,omitempty"`
	// Builtin is true for the providers stem knows without configuration.
	Builtin bool `json:"builtin"`
}

// ConfigFile is the providers' configuration file inside stem's config
// directory.
const ConfigFile = "agents.toml"

// Adapters.
const (
	AdapterCodex  = "codex"
	AdapterClaude = "claude"
	AdapterGemini = "gemini"
	AdapterCustom = "custom"
)

// Builtins are the providers stem knows without configuration.
func Builtins() []Provider {
	return []Provider{
		{Name: "codex", Adapter: AdapterCodex, Command: []string{"codex"}, Builtin: true,
			Install: "npm install -g @openai/codex (a checkout of stem: scripts/install-agent-clis.sh)"},
		{Name: "claude", Adapter: AdapterClaude, Command: []string{"claude"}, Builtin: true,
			Install: "npm install -g @anthropic-ai/claude-code (a checkout of stem: scripts/install-agent-clis.sh)"},
		{Name: "gemini", Adapter: AdapterGemini, Command: []string{"gemini"}, Builtin: true,
			Install: "npm install -g @google/gemini-cli (a checkout of stem: scripts/install-agent-clis.sh)"},
		{Name: "custom", Adapter: AdapterCustom, Builtin: true},
	}
}

// Providers is the set of known providers: the builtins, overridden and
// extended by the configuration file.
type Providers struct {
	// Path is the configuration file that was read ("" when none exists).
	Path string
	list []Provider
}

// configFile is the TOML shape of agents.toml.
type configFile struct {
	Providers map[string]struct {
		Adapter string            `toml:"adapter"`
		Command []string          `toml:"command"`
		Args    []string          `toml:"args"`
		Env     map[string]string `toml:"env"`
		Install string            `toml:"install"`
		Egress  []string          `toml:"egress"`
	} `toml:"providers"`
}

// At most 32 bytes, checked apart (a bounded repetition compiles to that
// many copies of the class, paid at every start-up).
var providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// LoadProviders reads configDir/agents.toml (a missing file is no error).
func LoadProviders(configDir string) (*Providers, error) {
	ps := &Providers{list: Builtins()}
	path := filepath.Join(configDir, ConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ps, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	ps.Path = path
	var cf configFile
	md, err := toml.Decode(string(data), &cf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, tomlmsg.Explain(err))
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: unknown keys %s (a provider takes adapter, command, args, env, install, egress)", path, strings.Join(keys, ", "))
	}
	names := make([]string, 0, len(cf.Providers))
	for n := range cf.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cf.Providers[name]
		if len(name) > 32 || !providerNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s: provider name %q: use lower-case letters, digits, '-' and '_'", path, name)
		}
		p, ok := ps.lookup(name)
		if !ok {
			p = Provider{Name: name, Adapter: AdapterCustom}
		}
		if c.Adapter != "" {
			if p.Builtin && c.Adapter != p.Adapter {
				return nil, fmt.Errorf("%s: provider %s is built in with adapter %s; give your variant another name", path, name, p.Adapter)
			}
			p.Adapter = c.Adapter
		}
		switch p.Adapter {
		case AdapterCodex, AdapterClaude, AdapterGemini, AdapterCustom:
		default:
			return nil, fmt.Errorf("%s: provider %s: unknown adapter %q (codex, claude, gemini or custom)", path, name, p.Adapter)
		}
		if len(c.Command) > 0 {
			if c.Command[0] == "" {
				return nil, fmt.Errorf("%s: provider %s: empty program in command", path, name)
			}
			p.Command = c.Command
		}
		if c.Args != nil {
			p.Args = c.Args
		}
		if c.Env != nil {
			p.Env = c.Env
		}
		if c.Install != "" {
			p.Install = c.Install
		}
		if c.Egress != nil {
			for _, r := range c.Egress {
				if _, err := egress.ParseRule(r); err != nil {
					return nil, fmt.Errorf("%s: provider %s: %w", path, name, err)
				}
			}
			p.Egress = c.Egress
		}
		if len(p.Command) == 0 {
			return nil, fmt.Errorf("%s: provider %s has no command", path, name)
		}
		ps.set(p)
	}
	return ps, nil
}

func (ps *Providers) lookup(name string) (Provider, bool) {
	for _, p := range ps.list {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

func (ps *Providers) set(p Provider) {
	for i := range ps.list {
		if ps.list[i].Name == p.Name {
			ps.list[i] = p
			return
		}
	}
	ps.list = append(ps.list, p)
}

// List returns every provider, builtins first.
func (ps *Providers) List() []Provider { return append([]Provider(nil), ps.list...) }

// Names returns the provider names (for completion).
func (ps *Providers) Names() []string {
	out := make([]string, len(ps.list))
	for i, p := range ps.list {
		out[i] = p.Name
	}
	return out
}

// Get returns the named provider or an error listing the known ones.
func (ps *Providers) Get(name string) (Provider, error) {
	p, ok := ps.lookup(name)
	if !ok {
		where := "add it under [providers." + name + "] in " + ConfigFile + " in stem's config directory"
		if ps.Path != "" {
			where = "add it under [providers." + name + "] in " + ps.Path
		}
		return Provider{}, fmt.Errorf("unknown agent provider %q: known are %s; %s", name, strings.Join(ps.Names(), ", "), where)
	}
	if len(p.Command) == 0 {
		return Provider{}, fmt.Errorf("provider %s has no command: give one in %s, for example\n\n  [providers.%s]\n  command = [\"/path/to/agent\", \"--mcp-config\", \"{mcp_config}\"]", p.Name, ps.configHint(), p.Name)
	}
	return p, nil
}

func (ps *Providers) configHint() string {
	if ps.Path != "" {
		return ps.Path
	}
	return "$STEM_CONFIG_DIR/" + ConfigFile + " (default ~/.config/stem/" + ConfigFile + ")"
}

// MissingError reports a provider program that is not installed.
type MissingError struct {
	Provider string
	Program  string
	Install  string
}

func (e *MissingError) Error() string {
	msg := fmt.Sprintf("agent provider %s: program %q not found", e.Provider, e.Program)
	if !strings.Contains(e.Program, "/") {
		msg += " in PATH"
	}
	if e.Install != "" {
		msg += "; install it: " + e.Install
	} else {
		msg += "; install it or set the full path in command = [...] of [providers." + e.Provider + "] in " + ConfigFile
	}
	return msg
}

// keyPages says where each adapter's keys are made.
var keyPages = map[string]string{
	"claude": "console.anthropic.com, API keys",
	"codex":  "platform.openai.com, API keys",
	"gemini": "aistudio.google.com, Get API key",
}

// InImage reports whether the provider's program is one the agent image
// carries: a built-in CLI named without a path.
func (p Provider) InImage() bool {
	return len(p.Command) > 0 && !strings.Contains(p.Command[0], "/") && p.Builtin && p.Adapter != AdapterCustom
}

// KeyPage says where keys for the adapter's CLI are made ("" for none).
func KeyPage(adapter string) string { return keyPages[adapter] }

// Binary resolves the provider's program with the PATH in path (the
// caller's environment, so the same program the student would run).
func (p Provider) Binary(path string) (string, error) {
	prog := p.Command[0]
	if strings.Contains(prog, "/") {
		fi, err := os.Stat(prog)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return "", &MissingError{Provider: p.Name, Program: prog, Install: p.Install}
		}
		return filepath.Abs(prog)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		cand := filepath.Join(dir, prog)
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return filepath.Abs(cand)
		}
	}
	return "", &MissingError{Provider: p.Name, Program: prog, Install: p.Install}
}
