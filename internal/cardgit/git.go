package cardgit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// fixedOverrides are given to every git stem runs in a card, on its
// command line (the highest precedence): no hook, no fsmonitor, no pager,
// editor, askpass, ssh or proxy command, no external diff, no credential
// helper, no network protocol at all, no bare repository found by
// discovery, no background maintenance, no signing program, no submodule
// recursion, and paths quoted (no control bytes from a file name reach
// the terminal).
var fixedOverrides = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.untrackedCache=false",
	"core.pager=cat",
	"core.editor=false",
	"sequence.editor=false",
	"core.askPass=",
	"core.sshCommand=false",
	"core.gitProxy=",
	"core.alternateRefsCommand=",
	"core.quotePath=true",
	"diff.external=",
	"credential.helper=",
	"protocol.allow=never",
	"safe.bareRepository=explicit",
	"gc.auto=0",
	"maintenance.auto=false",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"submodule.recurse=false",
	"status.submoduleSummary=false",
	"diff.ignoreSubmodules=all",
	"color.ui=false",
}

// driverKeys are per-name keys that name a program: each one the
// effective configuration defines is set empty on the command line.
// (Attributes in the card's worktree choose the driver by name.)
var driverKeys = map[string][]string{
	"filter":     {"clean", "smudge", "process"},
	"diff":       {"textconv", "command"},
	"merge":      {"driver"},
	"credential": {"helper"},
	"hook":       {"command"},
}

// allowedEnv are the caller's variables git may see; every other GIT_*
// variable (GIT_DIR, GIT_CONFIG_PARAMETERS, GIT_EXEC_PATH ...) is dropped
// so the pinning below is all there is.
var allowedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ",
	"XDG_CONFIG_HOME", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
	"GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "EMAIL"}

// runner runs git on the host, pinned to one card's git directory and
// work tree, with the hardened environment and overrides.
type runner struct {
	git, card, gitDir string
	// workTree is git's work tree and working directory: the card for
	// configuration, a private shadow directory for a commit.
	workTree  string
	env       []string
	overrides []setting
}

// setting is one configuration key and its value.
type setting struct{ key, value string }

// fixed is fixedOverrides as settings (no fixed key holds "=").
func fixed() []setting {
	out := make([]setting, len(fixedOverrides))
	for i, o := range fixedOverrides {
		k, v, _ := strings.Cut(o, "=")
		out[i] = setting{k, v}
	}
	return out
}

func newRunner(git, card, gitDir string, callerEnv []string) *runner {
	if git == "" {
		git = "git"
	}
	keep := map[string]string{}
	for _, kv := range callerEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, a := range allowedEnv {
			if k == a {
				keep[k] = v
			}
		}
	}
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1", // the system file is no one's choice for this card
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(card),
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL=", // an empty list: every transport refused
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=false",
		"GIT_SSH_COMMAND=false",
		"GIT_ASKPASS=", "SSH_ASKPASS=",
	}
	for k, v := range keep {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return &runner{git: git, card: card, gitDir: gitDir, workTree: card, env: env, overrides: fixed()}
}

// with is a copy of r whose commands also get the variables extra.
func (r *runner) with(extra ...string) *runner {
	c := *r
	c.env = append(append([]string{}, r.env...), extra...)
	return &c
}

// command builds a git command: --no-pager, the pinned --git-dir and
// --work-tree, then args; it runs in the work tree. The overrides go in
// GIT_CONFIG_COUNT/KEY_n/VALUE_n (the command line's precedence, and a
// driver name holding "=" cannot split a key from its value as in -c).
func (r *runner) command(ctx context.Context, args ...string) *exec.Cmd {
	argv := append([]string{"--no-pager", "--git-dir=" + r.gitDir, "--work-tree=" + r.workTree}, args...)
	cmd := exec.CommandContext(ctx, r.git, argv...)
	cmd.Dir = r.workTree
	env := append([]string{}, r.env...)
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(r.overrides)))
	for i, o := range r.overrides {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, o.key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, o.value))
	}
	cmd.Env = env
	// Its own process group: a Ctrl-C reaches stemctl, which cancels ctx,
	// and git then gets SIGTERM, on which it removes its lock files.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// output runs git and returns its standard output; a failure carries its
// standard error.
func (r *runner) output(ctx context.Context, args ...string) ([]byte, error) {
	return r.outputIn(ctx, nil, args...)
}

// outputIn is output with stdin as git's standard input.
func (r *runner) outputIn(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := r.command(ctx, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// run runs git with its output going to w.
func (r *runner) run(ctx context.Context, w io.Writer, args ...string) error {
	cmd := r.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stdout = w
	cmd.Stderr = io.MultiWriter(w, &stderr)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// configEntry is one line of `git config --list --show-origin -z`.
type configEntry struct {
	origin, key, value string
}

// config lists the configuration git would use here, includes followed.
func (r *runner) config(ctx context.Context) ([]configEntry, error) {
	out, err := r.output(ctx, "config", "--list", "--show-origin", "-z")
	if err != nil {
		return nil, err
	}
	return parseConfigList(out)
}

// parseConfigList reads "origin NUL key [LF value] NUL" records.
func parseConfigList(out []byte) ([]configEntry, error) {
	var es []configEntry
	fields := bytes.Split(out, []byte{0})
	if len(fields) > 0 && len(fields[len(fields)-1]) == 0 {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("git config --list: unexpected output")
	}
	for i := 0; i < len(fields); i += 2 {
		k, v, _ := strings.Cut(string(fields[i+1]), "\n")
		es = append(es, configEntry{origin: string(fields[i]), key: k, value: v})
	}
	return es, nil
}

// checkOrigins refuses configuration read from a file the container can
// write: anywhere in the card but its git directory (an include.path of
// "../x" in .git/config names the work tree).
func (r *runner) checkOrigins(es []configEntry) error {
	card, err := filepath.EvalSymlinks(r.card)
	if err != nil {
		return err
	}
	gitDir, err := filepath.EvalSymlinks(r.gitDir)
	if err != nil {
		return err
	}
	for _, e := range es {
		p, ok := strings.CutPrefix(e.origin, "file:")
		if !ok {
			if e.origin == "command line:" {
				continue
			}
			return fmt.Errorf("git reads configuration from %q, which stem does not vouch for", e.origin)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.card, p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = filepath.Clean(p)
		}
		if within(card, real) && !within(gitDir, real) {
			return fmt.Errorf("git would read configuration (%s) from %s, a file in the card that code in the container can write (an include?): remove that include from your git configuration", e.key, real)
		}
	}
	return nil
}

// driverOverrides sets empty every program a driver section of es names
// (and a filter's "required", so an emptied filter is not an error).
func driverOverrides(es []configEntry) []setting {
	seen := map[setting]bool{}
	var out []setting
	add := func(st setting) {
		if !seen[st] {
			seen[st] = true
			out = append(out, st)
		}
	}
	for _, e := range es {
		k := strings.ToLower(e.key)
		dot := strings.IndexByte(k, '.')
		last := strings.LastIndexByte(k, '.')
		if dot < 0 || last <= dot {
			continue
		}
		section, name := k[:dot], k[last+1:]
		for _, want := range driverKeys[section] {
			if name == want {
				// e.key keeps the subsection's case: git matches it exactly.
				add(setting{e.key, ""})
			}
		}
		if section == "filter" && name == "required" {
			add(setting{e.key, "false"})
		}
	}
	return out
}
