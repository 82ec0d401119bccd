// Package gate is the forced command of a teacher's automation key:
//
//	restrict,command="/usr/local/bin/stem-mcp gate --grant g0123456789abcdef" ssh-ed25519 AAAA...
//
// sshd runs it for every connection with that key, whatever the client
// asked for; the client's request arrives only as SSH_ORIGINAL_COMMAND. The
// gate accepts exactly its own verbs there (`mcp [INSTANCE]`, `status`,
// `list`), takes the level and the allowed instances from the grants store
// (never from the client), and refuses everything else with one line on
// stderr, a non-zero exit and an audit entry. It never runs a shell.
package gate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/xdg"
)

// Identity says who is connected, for the MCP server's audit entries.
type Identity struct {
	Account string // the student's Unix account
	Grant   string // "name:id" of the grant
	KeyFP   string // SHA256 fingerprint of the automation key
	Client  string // client address "ip:port" from SSH_CONNECTION
}

// ServeRequest is what the gate hands the MCP server for `mcp [INSTANCE]`.
// Everything in it comes from the grant or from the gate's own checks.
type ServeRequest struct {
	Level            string   // observe, assist or full, from the grant
	Instance         string   // "" = follow the selection
	AllowedInstances []string // nil = any instance of this account
	Identity         Identity
	// Getenv is the environment to resolve directories with: the few
	// variables sshd passes, overlaid with what stemctl recorded at grant
	// time (XDG_RUNTIME_DIR, STEM_STATE_DIR, ...). Nothing else.
	Getenv func(string) string
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// Status is the status verb's answer for this same grant, audited on
	// every call (as "gate.mcp_status"): the MCP server offers it as its
	// gate_status tool, so a teacher's open session can poll it without a
	// new SSH connection. It gives nothing the status verb does not.
	Status func(context.Context) (Status, error)
}

// Probe asks whether a tmux or Neovim server answers on a socket.
type Probe func(ctx context.Context, socket string) error

// Options configure one gate run.
type Options struct {
	GrantID   string // from the forced command (--grant)
	ConfigDir string // from the forced command (--config-dir); "" = $HOME/.config/stem

	Getenv func(string) string // the process environment
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// Serve speaks MCP on In/Out at the request's level until the client
	// goes away. Required for the mcp verb.
	Serve func(context.Context, ServeRequest) error
	// Tmux and Nvim probe an instance's servers for `status`; nil dials the
	// socket (it answers if it accepts a connection).
	Tmux, Nvim Probe
	// Activity asks an answering tmux when the student last did something
	// (probe.TmuxActivity); nil leaves it out of `status`.
	Activity func(ctx context.Context, socket string) (time.Time, error)
	Now      func() time.Time
	// RecheckEvery is how often an open MCP session re-reads its grant
	// (default 2s); the session ends when the grant is revoked or expires.
	RecheckEvery time.Duration
}

// Refusal is a request the gate turned down. Its message is the one line
// printed on stderr, after its code (internal/errcode), which is what a
// teacher's stemctl reads.
type Refusal struct {
	Code   errcode.Code
	Reason string
}

func (r *Refusal) Error() string { return "refused: " + r.Reason }

// Exit codes.
const (
	ExitRefused = 1 // the request was refused (and audited)
	ExitFailed  = 2 // the forced command is wrong, or serving failed (not a refusal)
)

// Main parses the forced command's own arguments (everything after
// `stem-mcp gate`), runs the gate and returns the process exit code. It
// prints errors itself, one line each.
func Main(ctx context.Context, args []string, opt Options) int {
	if opt.ErrOut == nil {
		opt.ErrOut = os.Stderr
	}
	fs := flag.NewFlagSet("stem-mcp gate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&opt.GrantID, "grant", "", "grant ID (written by `stemctl access grant`)")
	fs.StringVar(&opt.ConfigDir, "config-dir", "", "stem config directory holding access/grants.json")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintf(opt.ErrOut, "stem-mcp gate: %sbad forced command (usage: stem-mcp gate --grant ID [--config-dir DIR]); the student must run `stemctl access check`\n", errcode.Tag(errcode.BadSetup))
		return ExitFailed
	}
	err := Run(ctx, opt)
	if err == nil {
		return 0
	}
	var r *Refusal
	refused := errors.As(err, &r)
	code := errcode.Of(err)
	if refused && r.Code != "" {
		code = r.Code
	}
	fmt.Fprintf(opt.ErrOut, "stem-mcp gate: %s%s\n", errcode.Tag(code), termtext.Line(err.Error(), maxErrorLine))
	if refused {
		return ExitRefused
	}
	return ExitFailed
}

// maxErrorLine bounds an error the gate prints or reports, as one clean
// line (termtext.Line) whatever it wrapped: it may quote a container's
// server.
const maxErrorLine = 2000

// session is one gate run's resolved context.
type session struct {
	opt     Options
	grant   access.Grant
	id      Identity
	env     func(string) string
	request string

	logMu sync.Mutex // the MCP session's gate_status calls come at once
	log   *audit.Log
}

// Run checks the request in SSH_ORIGINAL_COMMAND against the grant and
// serves it. Refusals are *Refusal errors and are audited.
func Run(ctx context.Context, opt Options) error {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	if opt.ErrOut == nil {
		opt.ErrOut = io.Discard
	}
	if !access.ValidGrantID(opt.GrantID) {
		return errcode.Errorf(errcode.BadSetup, "bad forced command: grant id %q is malformed; the student must run `stemctl access check`", opt.GrantID)
	}
	s := &session{opt: opt, request: opt.Getenv("SSH_ORIGINAL_COMMAND")}
	s.id = Identity{Account: account(opt.Getenv), Client: clientAddr(opt.Getenv("SSH_CONNECTION"))}

	configDir := opt.ConfigDir
	if configDir == "" {
		home := opt.Getenv("HOME")
		if home == "" {
			return errcode.Errorf(errcode.BadSetup, "HOME is not set and the forced command names no --config-dir")
		}
		configDir = access.DefaultConfigDir(home)
	}
	store, err := access.OpenStore(configDir)
	if err != nil {
		return errcode.Errorf(errcode.BadSetup, "bad forced command: %w", err)
	}
	st, err := store.LoadChecked(ctx)
	if err != nil {
		s.env = s.environ(nil)
		return s.refuse(ctx, "", errcode.BadSetup, fmt.Sprintf("grant %s cannot be read: %v", opt.GrantID, err))
	}
	s.env = s.environ(st.Env)
	g, ok := st.Grants[opt.GrantID]
	if !ok {
		return s.refuse(ctx, "", errcode.Revoked, fmt.Sprintf("grant %s does not exist (revoked?); ask the student to grant this key again", opt.GrantID))
	}
	s.grant = g
	s.id.Grant, s.id.KeyFP = g.Label(), g.KeyFP
	if g.Expired(opt.Now()) {
		return s.refuse(ctx, "", errcode.Expired, fmt.Sprintf("grant %s expired at %s; ask the student for a new grant", g.Name, g.Expires.UTC().Format(time.RFC3339)))
	}
	// sshd enforces from= on the line; checking the stored pattern too means
	// a line that lost it (hand edit) cannot widen the grant.
	if g.From != "" {
		ip, _, _ := strings.Cut(opt.Getenv("SSH_CONNECTION"), " ")
		ok, err := access.MatchFrom(g.From, ip)
		if err != nil || !ok {
			why := fmt.Sprintf("client address %q is not allowed by grant %s (from=%s)", ip, g.Name, g.From)
			if err != nil {
				why = fmt.Sprintf("grant %s is limited to from=%s: %v", g.Name, g.From, err)
			}
			return s.refuse(ctx, "", errcode.NotGranted, why)
		}
	}
	verb, arg, err := ParseCommand(s.request)
	if err != nil {
		return s.refuse(ctx, "", errcode.BadInput, err.Error())
	}
	if arg != "" && !g.Allows(arg) {
		return s.refuse(ctx, arg, errcode.NotGranted, fmt.Sprintf("instance %q is not in grant %s (allowed: %s)", arg, g.Name, strings.Join(g.Instances, ", ")))
	}
	switch verb {
	case "mcp":
		if opt.Serve == nil {
			return errors.New("this stem-mcp cannot serve MCP from the gate (no server wired)")
		}
		return s.serve(ctx, store, arg)
	case "status":
		return s.status(ctx)
	case "list":
		return s.list(ctx)
	}
	return s.refuse(ctx, "", errcode.BadInput, fmt.Sprintf("unknown verb %q", verb))
}

// serve runs the MCP server and ends it when the grant is revoked or
// expires: revoking must not leave an open session running at a level
// nobody grants any more.
func (s *session) serve(ctx context.Context, store *access.Store, instance string) error {
	// Every session is audited (the server writes its start): one that
	// cannot be is refused before anything is served.
	if err := s.checkAudit(ctx); err != nil {
		return s.unaudited("MCP session not served", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	every := s.opt.RecheckEvery
	if every == 0 {
		every = 2 * time.Second
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if r := s.recheck(ctx, store); r != nil {
				cancel(r)
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- s.opt.Serve(ctx, ServeRequest{
			Level:            s.grant.Level,
			Instance:         instance,
			AllowedInstances: allowed(s.grant),
			Identity:         s.id,
			Getenv:           s.env,
			In:               s.opt.In,
			Out:              s.opt.Out,
			ErrOut:           s.opt.ErrOut,
			Status: func(ctx context.Context) (Status, error) {
				return s.statusOf(ctx, "gate.mcp_status")
			},
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// A server blocked in a read may not notice the cancellation; the
		// gate's caller exits the process when Run returns, which ends it.
		select {
		case err = <-done:
		case <-time.After(2 * time.Second):
		}
	}
	var r *Refusal
	if cause := context.Cause(ctx); errors.As(cause, &r) {
		if aerr := s.audit(context.WithoutCancel(ctx), audit.Entry{
			Event: audit.SessionEnd, Instance: instance, Level: s.grant.Level, Result: "refused", Detail: r.Reason,
		}); aerr != nil {
			return &Refusal{Code: r.Code, Reason: r.Reason + " (" + notAudited(aerr) + ")"}
		}
		return r
	}
	var we *audit.WriteError
	if errors.As(err, &we) {
		// The server refused the session: its start could not be audited.
		return s.unaudited("MCP session not served", we)
	}
	return err
}

// recheck returns why the session must end now, or nil.
func (s *session) recheck(ctx context.Context, store *access.Store) *Refusal {
	st, err := store.LoadChecked(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &Refusal{errcode.BadSetup, fmt.Sprintf("grant %s can no longer be read (%v); session ended", s.grant.Name, err)}
	}
	g, ok := st.Grants[s.grant.ID]
	switch {
	case !ok:
		return &Refusal{errcode.Revoked, fmt.Sprintf("grant %s was revoked; session ended", s.grant.Name)}
	case g.Expired(s.opt.Now()):
		return &Refusal{errcode.Expired, fmt.Sprintf("grant %s expired; session ended", s.grant.Name)}
	case g.Level != s.grant.Level || strings.Join(g.Instances, ",") != strings.Join(s.grant.Instances, ","):
		return &Refusal{errcode.GrantChanged, fmt.Sprintf("grant %s was changed; session ended (connect again)", s.grant.Name)}
	}
	return nil
}

func allowed(g access.Grant) []string {
	if len(g.Instances) == 0 {
		return nil
	}
	return append([]string(nil), g.Instances...)
}

// Verbs the gate accepts, for messages.
const verbsHelp = "`mcp [INSTANCE]`, `status` or `list`"

// maxCommand bounds SSH_ORIGINAL_COMMAND.
const maxCommand = 256

// ParseCommand reads SSH_ORIGINAL_COMMAND. Only letters, digits, '.', '_',
// '-' and single spaces pass; so no shell metacharacter, quote, slash,
// newline or control character ever reaches anything. It returns the verb
// and its optional instance argument.
func ParseCommand(cmd string) (verb, instance string, err error) {
	if cmd == "" {
		return "", "", fmt.Errorf("no command given; this key only accepts %s", verbsHelp)
	}
	if len(cmd) > maxCommand {
		return "", "", fmt.Errorf("command is %d bytes, over %d; this key only accepts %s", len(cmd), maxCommand, verbsHelp)
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ' '
		if !ok {
			return "", "", fmt.Errorf("character %q at byte %d is not allowed in %q; this key only accepts %s", string(c), i, cmd, verbsHelp)
		}
	}
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return "", "", fmt.Errorf("no command given; this key only accepts %s", verbsHelp)
	}
	verb = f[0]
	switch verb {
	case "mcp":
		if len(f) > 2 {
			return "", "", fmt.Errorf("`mcp` takes at most one instance name, got %q", cmd)
		}
		if len(f) == 2 {
			instance = f[1]
			if err := access.ValidInstance(instance); err != nil {
				return "", "", err
			}
		}
		return verb, instance, nil
	case "status", "list":
		if len(f) != 1 {
			return "", "", fmt.Errorf("`%s` takes no arguments, got %q", verb, cmd)
		}
		return verb, "", nil
	}
	return "", "", fmt.Errorf("%q is not a verb of this key; it only accepts %s (no shell)", verb, verbsHelp)
}

// refuse audits a refusal with its code and returns it. A refusal that
// cannot be audited is still a refusal; its one line says it was not
// recorded.
func (s *session) refuse(ctx context.Context, instance string, code errcode.Code, reason string) error {
	if err := s.audit(ctx, audit.Entry{
		Event: audit.Refused, Instance: instance, Level: s.grant.Level, Result: "refused",
		Detail: fmt.Sprintf("ssh command %q: %s", s.request, reason),
	}); err != nil {
		reason += " (" + notAudited(err) + ")"
	}
	return &Refusal{Code: code, Reason: reason}
}

// unaudited refuses an accepted request whose audit entry cannot be
// written (err): nothing is served or answered unaudited.
// what names the request ("MCP session not served").
func (s *session) unaudited(what string, err error) error {
	return &Refusal{Code: errcode.NotAudited, Reason: fmt.Sprintf("%s: %v", what, err)}
}

func notAudited(err error) string {
	return "this refusal is not in the audit log: " + err.Error()
}

// audit appends e (with the session's identity); the error says why the
// entry could not be written.
func (s *session) audit(ctx context.Context, e audit.Entry) error {
	log, err := s.auditLog()
	if err != nil {
		return fmt.Errorf("audit log unavailable: %w", err)
	}
	e.Account, e.Grant, e.KeyFP, e.Client = s.id.Account, s.id.Grant, s.id.KeyFP, s.id.Client
	if e.Grant == "" {
		e.Grant = s.opt.GrantID
	}
	actx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	_, err = log.Append(actx, e)
	return err
}

// checkAudit reports whether the audit log can take an entry now.
func (s *session) checkAudit(ctx context.Context) error {
	log, err := s.auditLog()
	if err != nil {
		return fmt.Errorf("audit log unavailable: %w", err)
	}
	actx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	return log.Check(actx)
}

// auditTimeout bounds one audit write (another stem process may hold the
// log's lock).
const auditTimeout = 5 * time.Second

func (s *session) auditLog() (*audit.Log, error) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.log != nil {
		return s.log, nil
	}
	d, err := xdg.Resolve(s.env)
	if err != nil {
		return nil, err
	}
	s.log, err = audit.Open(d.State)
	return s.log, err
}

// passThrough are the only process variables the server sees besides the
// recorded ones; sshd may let a client set LANG/LC_* (AcceptEnv), which
// are harmless, and nothing else reaches us.
var passThrough = []string{"HOME", "USER", "LOGNAME", "PATH", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// environ builds the server's environment: passThrough from the process,
// overlaid with the recorded variables.
func (s *session) environ(recorded map[string]string) func(string) string {
	env := map[string]string{}
	for _, k := range passThrough {
		if v := s.opt.Getenv(k); v != "" {
			env[k] = v
		}
	}
	for k, v := range recorded {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

func account(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if v := getenv("USER"); v != "" {
		return v
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

// clientAddr turns SSH_CONNECTION ("client_ip client_port server_ip
// server_port") into "client_ip:client_port".
func clientAddr(conn string) string {
	f := strings.Fields(conn)
	if len(f) < 2 {
		return ""
	}
	return net.JoinHostPort(f[0], f[1])
}
