// Package mcpconfig writes MCP server entries into agent CLIs'
// configuration files: Codex (config.toml, [mcp_servers.NAME]), Claude Code
// (.mcp.json or ~/.claude.json, "mcpServers") and Gemini CLI
// (settings.json, "mcpServers").
//
// Merging changes only the named entry. Everything else in the file (other
// servers, other settings, comments, key order, indentation) is kept byte
// for byte: the new entry is spliced into the original text, and the result
// is parsed back and compared with the original minus that entry before it
// is returned, so a merge that would disturb anything else fails instead.
package mcpconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/sockets"
)

// ToolTimeout is how long the entries stem writes ask a CLI to wait for
// one tool call: the longest call stem-mcp allows (a 10-minute task_action
// or pane_run, and its grace) with a margin. mcpserver's tests hold every
// tool to it.
const ToolTimeout = 11 * time.Minute

// Entry is one MCP server launched over stdio.
type Entry struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// 1-64 of these, the length checked apart (a bounded repetition compiles
// to 64 copies of the class, paid at every start-up).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks what every provider accepts: names of letters, digits,
// '-' and '_' (Claude's rule) that do not start with '-', a command, and
// printable strings.
func (e Entry) Validate() error {
	if len(e.Name) > 64 || !nameRE.MatchString(e.Name) {
		return fmt.Errorf("invalid MCP server name %q: use 1-64 letters, digits, '-' or '_'", e.Name)
	}
	if strings.HasPrefix(e.Name, "-") {
		// `claude mcp add ... NAME -- ssh ...` (ClaudeAddArgs) would take
		// it for an option.
		return fmt.Errorf("invalid MCP server name %q: it must not start with '-' (a command line would take it for an option)", e.Name)
	}
	if e.Command == "" {
		return fmt.Errorf("MCP server %s has no command", e.Name)
	}
	for _, s := range append([]string{e.Command}, e.Args...) {
		if strings.ContainsAny(s, "\x00\n\r") {
			return fmt.Errorf("MCP server %s: argument %q contains a control character", e.Name, s)
		}
	}
	// Sorted, so that of several bad names the same one is reported each time.
	keys := make([]string, 0, len(e.Env))
	for k := range e.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00\n") {
			return fmt.Errorf("MCP server %s: invalid environment variable name %q", e.Name, k)
		}
	}
	return nil
}

// Provider is an agent CLI.
type Provider string

// Providers.
const (
	Codex  Provider = "codex"
	Claude Provider = "claude"
	Gemini Provider = "gemini"
)

// ParseProvider validates a provider name.
func ParseProvider(s string) (Provider, error) {
	switch p := Provider(s); p {
	case Codex, Claude, Gemini:
		return p, nil
	}
	return "", fmt.Errorf("unknown provider %q: use codex, claude or gemini", s)
}

// Scope selects the configuration file of a provider.
type Scope string

// Scopes: user-wide or for one project directory.
const (
	User    Scope = "user"
	Project Scope = "project"
)

// DefaultPath is the file an entry goes into. home is the user's home,
// dir the project directory (for Project scope), getenv the environment
// (CODEX_HOME, CLAUDE_CONFIG_DIR).
func (p Provider) DefaultPath(scope Scope, home, dir string, getenv func(string) string) (string, error) {
	switch p {
	case Codex:
		if scope == Project {
			return filepath.Join(dir, ".codex", "config.toml"), nil
		}
		if h := getenv("CODEX_HOME"); h != "" {
			return filepath.Join(h, "config.toml"), nil
		}
		return filepath.Join(home, ".codex", "config.toml"), nil
	case Claude:
		if scope == Project {
			return filepath.Join(dir, ".mcp.json"), nil
		}
		if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
			return filepath.Join(d, ".claude.json"), nil
		}
		return filepath.Join(home, ".claude.json"), nil
	case Gemini:
		if scope == Project {
			return filepath.Join(dir, ".gemini", "settings.json"), nil
		}
		return filepath.Join(home, ".gemini", "settings.json"), nil
	}
	return "", fmt.Errorf("unknown provider %q", p)
}

// Merge returns existing (a whole configuration file, possibly empty) with
// e added or replaced.
func (p Provider) Merge(existing []byte, e Entry) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	switch p {
	case Codex:
		return mergeTOML(existing, e)
	case Claude, Gemini:
		return mergeJSON(existing, e, p.jsonValue(e))
	}
	return nil, fmt.Errorf("unknown provider %q", p)
}

// Remove returns existing without the entry named name (and whether it
// was there).
func (p Provider) Remove(existing []byte, name string) ([]byte, bool, error) {
	switch p {
	case Codex:
		return removeTOML(existing, name)
	case Claude, Gemini:
		return removeJSON(existing, name)
	}
	return nil, false, fmt.Errorf("unknown provider %q", p)
}

// Snippet is a complete configuration file holding only e: what to paste
// when not merging.
func (p Provider) Snippet(e Entry) ([]byte, error) {
	return p.Merge(nil, e)
}

// claudeServer and geminiServer fix the key order each CLI itself writes.
type claudeServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

type geminiServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// jsonValue is the provider's object for e under "mcpServers".
func (p Provider) jsonValue(e Entry) any {
	args := e.Args
	if args == nil {
		args = []string{}
	}
	if p == Claude {
		// What `claude mcp add` writes for a stdio server.
		env := e.Env
		if env == nil {
			env = map[string]string{}
		}
		return claudeServer{Type: "stdio", Command: e.Command, Args: args, Env: env}
	}
	return geminiServer{Command: e.Command, Args: args, Env: e.Env}
}

// ClaudeAddArgs is the argv of the `claude mcp add` command that registers
// e (Claude's own way; it writes ~/.claude.json for scope user).
func ClaudeAddArgs(e Entry, scope Scope) []string {
	args := []string{"claude", "mcp", "add", "--scope", string(scope)}
	keys := make([]string, 0, len(e.Env))
	for k := range e.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-e", k+"="+e.Env[k])
	}
	args = append(args, e.Name, "--", e.Command)
	return append(args, e.Args...)
}

// ShellQuote renders argv for a POSIX shell.
func ShellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// MergeFile merges e into the file at path: created (0600, parent 0700)
// when missing, otherwise replaced atomically with its mode kept.
func (p Provider) MergeFile(path string, e Entry) error {
	return p.MergeFileChecked(path, e, nil)
}

// MergeFileChecked is MergeFile that first shows check the entry of the
// same name already in the file (nil when there is none), on the same
// bytes the merge then edits; an error from check leaves the file alone.
func (p Provider) MergeFileChecked(path string, e Entry, check func(old *Entry) error) error {
	return editFile(path, func(data []byte) ([]byte, error) {
		if check != nil {
			old, found, err := p.Lookup(data, e.Name)
			if err != nil {
				return nil, err
			}
			var cur *Entry
			if found {
				cur = &old
			}
			if err := check(cur); err != nil {
				return nil, err
			}
		}
		return p.Merge(data, e)
	})
}

// Lookup returns the entry named name in existing (a whole configuration
// file, possibly empty), as far as its command and arguments go.
func (p Provider) Lookup(existing []byte, name string) (Entry, bool, error) {
	var (
		m     map[string]any
		err   error
		table string
	)
	switch p {
	case Codex:
		m, err = decodeTOML(existing)
		table = codexTable
	case Claude, Gemini:
		if len(bytes.TrimSpace(existing)) == 0 {
			return Entry{}, false, nil
		}
		m, err = decodeJSON(blankComments(existing))
		table = jsonTable
	default:
		return Entry{}, false, fmt.Errorf("unknown provider %q", p)
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("cannot be parsed (%v): fix it first", err)
	}
	servers, _ := m[table].(map[string]any)
	v, ok := servers[name]
	if !ok {
		return Entry{}, false, nil
	}
	e := Entry{Name: name}
	obj, _ := v.(map[string]any)
	e.Command, _ = obj["command"].(string)
	args, _ := obj["args"].([]any)
	for _, a := range args {
		s, _ := a.(string)
		e.Args = append(e.Args, s)
	}
	return e, true, nil
}

// RemoveFile removes the entry name from the file at path, if present.
func (p Provider) RemoveFile(path, name string) (bool, error) {
	var found bool
	err := editFile(path, func(data []byte) ([]byte, error) {
		out, ok, err := p.Remove(data, name)
		found = ok
		return out, err
	})
	return found, err
}

func editFile(path string, edit func([]byte) ([]byte, error)) error {
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r // keep a symlinked dotfile a symlink
	}
	mode := os.FileMode(0o600)
	data, err := os.ReadFile(real)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(real), err)
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		fi, err := os.Stat(real)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("%s belongs to uid %d, not to you: edit it as its owner", real, st.Uid)
		}
		mode = fi.Mode().Perm()
	}
	out, err := edit(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return sockets.WriteFileAtomic(real, out, mode)
}
