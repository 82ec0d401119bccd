// Package teacher implements `stemctl teacher`: on the teacher's machine,
// write agent CLIs' MCP configuration for reaching students' sessions over
// SSH with the automation key, and ask a student's gate for its status.
package teacher

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
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
