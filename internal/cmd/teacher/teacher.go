// Package teacher implements `stemctl teacher`: on the teacher's machine,
// write agent CLIs' MCP configuration for reaching students' sessions over
// SSH with the automation key, and ask a student's gate for its status.
package teacher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/termtext"
)

// NewCmdTeacher builds the group.
func NewCmdTeacher(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "teacher <command>",
		Short: "Connect a teacher's agent CLIs to students' sessions over SSH",
		Long: `Run these on the teacher's machine. Each student gets one MCP entry, named after
them, whose command is ssh with the automation key (never the ordinary key) to
the student's account, where the forced command stem-mcp gate serves MCP at the
level the student granted.`,
	}
	cmd.AddCommand(NewCmdConfig(f, nil), NewCmdStatus(f, nil), NewCmdDial(f, nil))
	return cmd
}

// targetFlags are shared by config and status.
type targetFlags struct {
	Host       string
	Key        string
	Port       int
	SSHOptions []string
	Force      bool
	Direct     bool
}

func (t *targetFlags) add(cmd *cobra.Command) {
	// A `word` in backquotes is what --help shows as the flag's value.
	cmd.Flags().StringVar(&t.Host, "host", "", "the student's account, `USER@HOST` (required)")
	cmd.Flags().StringVar(&t.Key, "key", "", "the automation private key `FILE` (default: the only ~/.ssh/stem_NAME made by stemctl access keygen)")
	cmd.Flags().IntVar(&t.Port, "port", 0, "SSH `PORT` on the student's machine")
	cmd.Flags().StringArrayVar(&t.SSHOptions, "ssh-option", nil, "extra ssh -o `KEY=VALUE` (repeatable), e.g. UserKnownHostsFile=/path")
	cmd.Flags().BoolVar(&t.Direct, "direct", false, "let ssh connect by itself instead of through stemctl teacher dial (slower handshake)")
	cmd.Flags().BoolVar(&t.Force, "force", false, "accept a key whose .pub lacks the stem-automation comment keygen writes (you vouch it is not your ordinary key)")
}

// target validates the flags; notes are advice and information for stderr.
func (t *targetFlags) target(ctx context.Context, f *cmdutil.Factory) (access.Target, []string, error) {
	if t.Host == "" {
		return access.Target{}, nil, cmdutil.FlagErrorf("--host is required: the student's USER@HOST")
	}
	d, err := f.Dirs()
	if err != nil {
		return access.Target{}, nil, err
	}
	var notes []string
	keyPath := t.Key
	if keyPath == "" {
		if keyPath, err = defaultKey(d.Home); err != nil {
			return access.Target{}, nil, err
		}
		notes = append(notes, fmt.Sprintf("using the automation key %s (the only one stemctl access keygen made in %s; --key FILE chooses another)", keyPath, filepath.Dir(keyPath)))
	}
	key, warns, err := access.CheckKeyFile(keyPath, access.KeyCheck{Home: d.Home, SSHHome: passwdHome(), Force: t.Force})
	if err != nil {
		return access.Target{}, nil, err
	}
	for _, w := range warns {
		notes = append(notes, "warning: "+w)
	}
	tg := access.Target{Host: t.Host, Key: key, Port: t.Port, SSHOptions: t.SSHOptions}
	args, err := tg.Command()
	if err != nil {
		return access.Target{}, nil, err
	}
	view, err := resolveSSH(ctx, args)
	if err != nil {
		return access.Target{}, nil, err
	}
	if others := view.otherIdentities(key); len(others) > 0 {
		notes = append(notes, fmt.Sprintf("warning: your ssh configuration also gives this host %s: IdentitiesOnly keeps those, so the entry's ssh offers them when the automation key is refused (say, after the student revokes the grant), and your ordinary key would log in with a shell; limit such lines to your other hosts (for example Host * !%s)", strings.Join(others, ", "), view.host))
	}
	if !t.Direct {
		dial, note, err := dialer(f, view)
		if err != nil {
			return access.Target{}, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		tg.Dial = dial
	}
	return tg, notes, nil
}

// ResolveTarget is what `teacher status --host HOST --key KEY --port PORT
// --ssh-option ...` reaches, for other commands that ask many students'
// gates (stemctl class): the key checked as teacher status checks it (key
// "" is the only automation key in ~/.ssh), the dialer chosen, and notes
// for stderr.
func ResolveTarget(ctx context.Context, f *cmdutil.Factory, host, key string, port int, sshOptions []string) (access.Target, []string, error) {
	t := targetFlags{Host: host, Key: key, Port: port, SSHOptions: sshOptions}
	return t.target(ctx, f)
}

// sshView is what `ssh -G` says the entry's ssh does for the host once the
// teacher's ~/.ssh/config (Host and Match blocks) is applied.
type sshView struct {
	host       string   // the host as given (the last argument)
	hostname   string   // after Hostname
	proxy      string   // "proxycommand X" or "proxyjump X" when set
	identities []string // identityfile and certificatefile lines, as ssh prints them
}

// resolveSSH runs ssh -G with the entry's arguments (without verb). Match
// exec lines run as they would when the agent connects; a configuration
// that answers differently then (another network, an edited file) can
// still differ from what this saw.
func resolveSSH(ctx context.Context, sshArgs []string) (sshView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append([]string{"-G"}, sshArgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return sshView{}, fmt.Errorf("ssh -G (read your ssh configuration for this host): %v %s: is OpenSSH's ssh installed?", err, strings.TrimSpace(stderr.String()))
	}
	v := sshView{host: sshArgs[len(sshArgs)-1]}
	if _, h, ok := strings.Cut(v.host, "@"); ok {
		v.host = h
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		val = strings.TrimSpace(val)
		switch k = strings.ToLower(k); k {
		case "hostname":
			v.hostname = val
		case "proxycommand", "proxyjump":
			if val != "" && !strings.EqualFold(val, "none") && v.proxy == "" {
				v.proxy = k + " " + val
			}
		case "identityfile", "certificatefile":
			v.identities = append(v.identities, val)
		}
	}
	return v, nil
}

// otherIdentities are the identity and certificate files besides key.
func (v sshView) otherIdentities(key string) []string {
	var o []string
	for _, id := range v.identities {
		if id != key {
			o = append(o, id)
		}
	}
	return o
}

// dialHostRE is a host name dial takes ('%h' in the ProxyCommand is
// single-quoted, so only a quote could break out; this is narrower).
var dialHostRE = regexp.MustCompile(`^[A-Za-z0-9._:%\[\]-]+$`)

// dialer is the program for the entry's ProxyCommand (stem-dial beside
// stemctl, else stemctl itself), or "" with a note when the teacher's own
// ssh configuration already sends this host through a proxy (a jump host
// must keep working; ours would replace it) or names it oddly.
func dialer(f *cmdutil.Factory, v sshView) (string, string, error) {
	self, err := f.Self()
	if err != nil {
		return "", "", err
	}
	// stem-dial starts in a fraction of stemctl's time (no Podman
	// bindings to initialise), which adds up when a teacher polls a class.
	if d := filepath.Join(filepath.Dir(self), access.DialBinary); isExecutable(d) {
		self = d
	}
	if _, err := access.DialCommand(self); err != nil {
		return "", "", err
	}
	if v.proxy != "" {
		return "", fmt.Sprintf("your ssh configuration reaches this host through %s: the entry keeps it and connects without stemctl teacher dial", v.proxy), nil
	}
	if !dialHostRE.MatchString(v.hostname) {
		return "", fmt.Sprintf("your ssh configuration names this host %q, which stemctl does not hand to the shell: the entry connects without stemctl teacher dial", v.hostname), nil
	}
	return self, "", nil
}

// defaultKey is the automation key to use when --key is omitted: the one
// keygen made in ~/.ssh, if there is exactly one.
func defaultKey(home string) (string, error) {
	keys, err := access.FindAutomationKeys(home)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, ".ssh")
	switch len(keys) {
	case 1:
		return keys[0], nil
	case 0:
		return "", cmdutil.FlagErrorf("--key FILE is required: there is no automation key in %s (stem_NAME with a stem-automation .pub); make one with `stemctl access keygen --name NAME`, or name a key kept elsewhere with --key", dir)
	default:
		return "", cmdutil.FlagErrorf("--key FILE is required: %s has %d automation keys, choose one:\n  %s", dir, len(keys), strings.Join(keys, "\n  "))
	}
}

func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// ConfigOptions are `teacher config`'s inputs.
type ConfigOptions struct {
	F        *cmdutil.Factory
	Target   targetFlags
	Provider string
	Instance string
	Name     string
	Class    string
	Write    bool
	Replace  bool
	File     string
	Scope    string
	JSON     bool
}

// NewCmdConfig builds `teacher config`.
func NewCmdConfig(f *cmdutil.Factory, runF func(context.Context, *ConfigOptions) error) *cobra.Command {
	opts := &ConfigOptions{F: f}
	cmd := &cobra.Command{
		Use:   "config --provider codex|claude|gemini --host USER@HOST [--key FILE]",
		Short: "Print or merge an agent CLI's MCP entry for one student",
		Long: `Print the MCP configuration entry that reaches a student's session, or with
--write merge it into the provider's file, keeping every other entry intact:

  codex   ~/.codex/config.toml ($CODEX_HOME)   [mcp_servers.NAME]
  claude  .mcp.json (--scope project, default) or ~/.claude.json (--scope user)
          "mcpServers"; also printed as a "claude mcp add" command
  gemini  ~/.gemini/settings.json (--scope user, default) or .gemini/settings.json
          "mcpServers"

The entry runs: ssh -T -a -x -i KEY -o BatchMode=yes -o IdentitiesOnly=yes
-o ControlPath=none -o PreferredAuthentications=publickey
-o ClearAllForwardings=yes -o PermitLocalCommand=no -o ProxyUseFdpass=no
-o "ProxyCommand=STEMCTL teacher dial '%h' %p" USER@HOST mcp [INSTANCE].
IdentitiesOnly, PreferredAuthentications and ControlPath=none keep ssh from
using any other key (such as your ordinary one), credential or existing
connection; -a, -x and ClearAllForwardings keep your agent, X display and
ports away from the student's machine. These win over ~/.ssh/config, but an
IdentityFile line there for the host is still offered (a warning names it).
--ssh-option takes only options about reaching the host and checking its key.
The level is decided on the student's side by their grant. "teacher dial" only
makes the TCP connection, tuned so the handshake does not wait on delayed ACKs
(about 0.06 s saved per connection); --direct leaves it out, and so does a
host your ssh configuration already reaches through ProxyJump or ProxyCommand.

Without --key, the automation key is the one "stemctl access keygen" made in
~/.ssh (stem_NAME), when there is exactly one; the choice is printed on stderr.

Many students: one entry each, named after them (default name stem-USER).
--write refuses to overwrite an entry of that name that reaches another
student (anna@lab-03 and anna@lab-04 are both stem-anna): give --name, or
--replace to overwrite it. Re-running for the same student updates it.
The student's host key must already be in known_hosts (BatchMode cannot ask).

A whole class instead: --class NAME writes one entry (default stem-class-NAME)
that runs stem-mcp class --class NAME on this machine, for the roster of
"stemctl class" (class_overview and class_events).`,
		Example: `  stemctl teacher config --provider codex --host anna@lab-03 --key ~/.ssh/stem_kowalski --write
  stemctl teacher config --provider claude --class lab3 --scope user --write
  stemctl teacher config --provider claude --host anna@lab-03 --key ~/.ssh/stem_kowalski \
      --instance hazard3-sim-inf-bss-t4 --scope user --write
  stemctl teacher config --provider gemini --host bob@lab-04 --key ~/.ssh/stem_kowalski --name bob`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunConfig(cmd.Context(), opts)
		},
	}
	opts.Target.add(cmd)
	cmd.Flags().StringVar(&opts.Provider, "provider", "", "codex, claude or gemini (required)")
	cmd.RegisterFlagCompletionFunc("provider", cmdutil.Fixed("codex", "claude", "gemini"))
	cmd.Flags().StringVar(&opts.Instance, "instance", "", "the student's instance (default: the one the student selected)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "entry name (default stem-USER from --host, or stem-class-NAME)")
	cmd.Flags().StringVar(&opts.Class, "class", "", "one entry for the whole class `NAME` (stem-mcp class; instead of --host)")
	cmd.Flags().BoolVar(&opts.Write, "write", false, "merge the entry into the provider's configuration file")
	cmd.Flags().BoolVar(&opts.Replace, "replace", false, "with --write, overwrite an entry of that name that reaches another student")
	cmd.Flags().StringVar(&opts.File, "file", "", "configuration `FILE` to merge into (default: the provider's, see above)")
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "user or project (which default file; claude defaults to project, the others to user)")
	cmd.RegisterFlagCompletionFunc("scope", cmdutil.Fixed("user", "project"))
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// defaultName is stem-USER (or stem-HOST) from USER@HOST.
func defaultName(host string) string {
	n := host
	if i := strings.IndexByte(host, '@'); i >= 0 {
		n = host[:i]
	}
	n = strings.Trim(nameUnsafe.ReplaceAllString(n, "-"), "-")
	if len(n) > 59 {
		n = n[:59]
	}
	return "stem-" + n
}

// studentOf is the USER@HOST[:PORT] an entry's ssh command reaches, or ""
// when the entry is not one of ours.
func studentOf(e mcpconfig.Entry) string {
	if filepath.Base(e.Command) != "ssh" {
		return ""
	}
	i := slices.Index(e.Args, "mcp")
	if i < 1 {
		return ""
	}
	dest := e.Args[i-1]
	for j := 0; j+1 < i-1; j++ {
		if e.Args[j] == "-p" {
			dest += ":" + e.Args[j+1]
		}
	}
	return dest
}

// sameStudent reports whether writing e over old keeps reaching the same
// account (a new key, instance or option for the same student).
func sameStudent(old, e mcpconfig.Entry) bool {
	s := studentOf(old)
	return s != "" && s == studentOf(e)
}

// suggestName is stem-USER-HOST, the name to use when stem-USER is taken.
func suggestName(host string) string {
	n := strings.Trim(nameUnsafe.ReplaceAllString(strings.Trim(host, "[]"), "-"), "-")
	if len(n) > 59 {
		n = n[:59]
	}
	return "stem-" + n
}

// Entry builds the MCP entry for a student.
func Entry(tg access.Target, name, instance string) (mcpconfig.Entry, error) {
	verb := []string{"mcp"}
	if instance != "" {
		if err := access.ValidInstance(instance); err != nil {
			return mcpconfig.Entry{}, err
		}
		verb = append(verb, instance)
	}
	args, err := tg.Command(verb...)
	if err != nil {
		return mcpconfig.Entry{}, err
	}
	e := mcpconfig.Entry{Name: name, Command: "ssh", Args: args}
	return e, e.Validate()
}

// RunConfig prints or writes the entry.
func RunConfig(ctx context.Context, opts *ConfigOptions) error {
	if opts.Provider == "" {
		return cmdutil.FlagErrorf("--provider is required: codex, claude or gemini")
	}
	p, err := mcpconfig.ParseProvider(opts.Provider)
	if err != nil {
		return cmdutil.FlagErrorf("--provider: %v", err)
	}
	scope := mcpconfig.Scope(opts.Scope)
	switch scope {
	case "":
		scope = mcpconfig.User
		if p == mcpconfig.Claude {
			scope = mcpconfig.Project
		}
	case mcpconfig.User, mcpconfig.Project:
	default:
		return cmdutil.FlagErrorf("--scope must be user or project")
	}
	var e mcpconfig.Entry
	var notes []string
	var suggest string
	if opts.Class != "" {
		e, notes, err = classEntry(opts)
		suggest = e.Name + "-2"
	} else {
		e, notes, suggest, err = studentEntry(ctx, opts)
	}
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	printNotes(ios.ErrOut, notes)
	path := opts.File
	if path == "" && (opts.Write || opts.JSON) {
		d, err := opts.F.Dirs()
		if err != nil {
			return err
		}
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("current directory: %w", err)
		}
		if path, err = p.DefaultPath(scope, d.Home, wd, opts.F.Getenv); err != nil {
			return err
		}
	}
	if opts.Write {
		err := p.MergeFileChecked(path, e, func(old *mcpconfig.Entry) error {
			if old == nil || opts.Replace || sameStudent(*old, e) || sameClass(*old, e) {
				return nil
			}
			// Default names come from the user part alone, so anna@lab-03
			// and anna@lab-04 would both be stem-anna: never drop one
			// student's entry for another's without being told to.
			return cmdutil.FlagErrorf("entry %q already reaches %s, not %s: choose another --name (e.g. --name %s) or pass --replace to overwrite it",
				e.Name, reaches(*old), reaches(e), suggest)
		})
		if err != nil {
			return err
		}
	}
	if opts.JSON {
		return cmdutil.WriteJSON(ios.Out, struct {
			Provider mcpconfig.Provider `json:"provider"`
			File     string             `json:"file"`
			Written  bool               `json:"written"`
			Entry    mcpconfig.Entry    `json:"entry"`
		}{p, path, opts.Write, e})
	}
	if opts.Write {
		fmt.Fprintf(ios.Out, "merged MCP server %q into %s\n", e.Name, path)
		return nil
	}
	snippet, err := p.Snippet(e)
	if err != nil {
		return err
	}
	switch p {
	case mcpconfig.Codex:
		fmt.Fprintf(ios.ErrOut, "# add to ~/.codex/config.toml (or run again with --write):\n")
	case mcpconfig.Claude:
		fmt.Fprintf(ios.ErrOut, "# register with Claude Code:\n%s\n# or put this in .mcp.json (or run again with --write):\n",
			mcpconfig.ShellQuote(mcpconfig.ClaudeAddArgs(e, scope)))
	case mcpconfig.Gemini:
		fmt.Fprintf(ios.ErrOut, "# merge into ~/.gemini/settings.json (or run again with --write):\n")
	}
	_, err = ios.Out.Write(snippet)
	return err
}

// StatusOptions are `teacher status`'s inputs.
type StatusOptions struct {
	F       *cmdutil.Factory
	Target  targetFlags
	Timeout time.Duration
	JSON    bool
}

// NewCmdStatus builds `teacher status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{F: f}
	cmd := &cobra.Command{
		Use:   "status --host USER@HOST [--key FILE]",
		Short: "Ask a student's gate which instances this key may reach and whether they answer",
		Long: `Run the gate's status verb over SSH with the automation key: the grant's name
and level, the allowed instances, and whether each one's tmux and Neovim answer.`,
		Example: `  stemctl teacher status --host anna@lab-03 --key ~/.ssh/stem_kowalski
  stemctl teacher status --host anna@lab-03 --key ~/.ssh/stem_kowalski --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunStatus(cmd.Context(), opts)
		},
	}
	opts.Target.add(cmd)
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Second, "give up after this long")
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// RunStatus runs `ssh ... status` and prints the answer.
func RunStatus(ctx context.Context, opts *StatusOptions) error {
	tg, notes, err := opts.Target.target(ctx, opts.F)
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	printNotes(ios.ErrOut, notes)
	args, err := tg.Command("status")
	if err != nil {
		return err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return fmt.Errorf("ssh %s status: no answer within %v", tg.Host, timeout)
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("ssh %s status: %s", tg.Host, msg)
	}
	var st gatestatus.Status
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return fmt.Errorf("ssh %s status: the answer is not the gate's JSON (%v): is the key's forced command stem-mcp gate? %s", tg.Host, err, strings.TrimSpace(stdout.String()))
	}
	if opts.JSON {
		return cmdutil.WriteJSON(ios.Out, st)
	}
	// The answer comes from the student's machine: each value is printed
	// as one clean line.
	clean := func(v string) string { return termtext.Line(v, 200) }
	fmt.Fprintf(ios.Out, "%s: account %s, grant %s, level %s\n", tg.Host, clean(st.Account), clean(st.Grant), clean(st.Level))
	if len(st.Instances) == 0 {
		fmt.Fprintln(ios.Out, "no instances on this account")
		return nil
	}
	tw := tabwriter.NewWriter(ios.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tANSWERS\tTMUX\tNVIM\tCONTAINER")
	for _, is := range st.Instances {
		cid := is.ContainerID
		if len(cid) > 12 {
			cid = cid[:12]
		}
		if !is.Registered {
			cid = "(not started)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%s\n", clean(is.Instance), is.Answers, is.Tmux, is.Nvim, clean(cid))
	}
	return tw.Flush()
}

// passwdHome is the home directory of the passwd entry, where ssh reads
// ~/.ssh/config from even when $HOME points elsewhere; "" if unknown.
func passwdHome() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// isExecutable reports whether path is a regular file someone may run.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// transientPath reports whether path is a binary `go run` built (in a
// go-build directory under $GOTMPDIR or the temporary directory).
func transientPath(path string) bool {
	return strings.Contains(path, "/go-build")
}
