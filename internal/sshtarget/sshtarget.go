// Package sshtarget works out how the teacher's ssh reaches one student's
// gate: the automation key checked (never the ordinary key), what the
// teacher's own ssh configuration does for the host, and whether the
// connection goes through stem-dial. `stemctl teacher`, `stemctl class`
// and `stem-mcp class` all reach students through it.
package sshtarget

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/teacherkey"
)

// Request names one student's account and how to reach it.
type Request struct {
	Host       string // USER@HOST
	Key        string // the automation key; "" is the only one keygen made in Home/.ssh
	Port       int
	SSHOptions []string
	// Force accepts a key whose .pub lacks keygen's comment.
	Force bool
	// Direct lets ssh connect by itself, without stem-dial.
	Direct bool
	// Home is the teacher's home (where ~/.ssh is looked for).
	Home string
	// Self is the running binary; stem-dial is looked for beside it.
	Self func() (string, error)
}

// Resolve checks the request and returns the target; notes are advice and
// information for stderr.
func Resolve(ctx context.Context, r Request) (teacherkey.Target, []string, error) {
	if r.Host == "" {
		return teacherkey.Target{}, nil, cmdutil.FlagErrorf("--host is required: the student's USER@HOST")
	}
	var notes []string
	keyPath := r.Key
	if keyPath == "" {
		var err error
		if keyPath, err = defaultKey(r.Home); err != nil {
			return teacherkey.Target{}, nil, err
		}
		notes = append(notes, fmt.Sprintf("using the automation key %s (the only one stemctl access keygen made in %s; --key FILE chooses another)", keyPath, filepath.Dir(keyPath)))
	}
	key, warns, err := teacherkey.CheckKeyFile(keyPath, teacherkey.KeyCheck{Home: r.Home, SSHHome: passwdHome(), Force: r.Force})
	if err != nil {
		return teacherkey.Target{}, nil, err
	}
	for _, w := range warns {
		notes = append(notes, "warning: "+w)
	}
	tg := teacherkey.Target{Host: r.Host, Key: key, Port: r.Port, SSHOptions: r.SSHOptions}
	args, err := tg.Command()
	if err != nil {
		return teacherkey.Target{}, nil, err
	}
	view, err := resolveSSH(ctx, args)
	if err != nil {
		return teacherkey.Target{}, nil, err
	}
	if others := view.otherIdentities(key); len(others) > 0 {
		notes = append(notes, fmt.Sprintf("warning: your ssh configuration also gives this host %s: IdentitiesOnly keeps those, so the entry's ssh offers them when the automation key is refused (say, after the student revokes the grant), and your ordinary key would log in with a shell; limit such lines to your other hosts (for example Host * !%s)", strings.Join(others, ", "), view.host))
	}
	if !r.Direct {
		dial, note, err := dialer(r.Self, view)
		if err != nil {
			return teacherkey.Target{}, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		tg.Dial = dial
	}
	return tg, notes, nil
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
func dialer(selfF func() (string, error), v sshView) (string, string, error) {
	self, err := selfF()
	if err != nil {
		return "", "", err
	}
	// stem-dial starts in a fraction of stemctl's time (no Podman
	// bindings to initialise), which adds up when a teacher polls a class.
	if d := filepath.Join(filepath.Dir(self), teacherkey.DialBinary); isExecutable(d) {
		self = d
	}
	if _, err := teacherkey.DialCommand(self); err != nil {
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
	keys, err := teacherkey.FindAutomationKeys(home)
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
