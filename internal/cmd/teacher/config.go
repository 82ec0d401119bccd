package teacher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/mcpconfig"
	"github.com/stem-edu/stem/internal/teacherkey"
)

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
		RunE: cmdutil.RunE(opts, runF, RunConfig),
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
func Entry(tg teacherkey.Target, name, instance string) (mcpconfig.Entry, error) {
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
