// Package access manages teacher access over SSH on the student's account:
// grants (which automation key may do what), the restricted lines in
// ~/.ssh/authorized_keys that force every such key through `stem-mcp gate`,
// and the consistency check between the two. It is the student's side
// only: the teacher's keys and ssh command line are internal/teacherkey's.
//
// The level and the allowed instances of a key live only in the grants
// store under stem's config directory. The authorized_keys line names a
// grant ID, so nothing the SSH client sends can change what the key may do.
package access

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/audit"
	"github.com/stem-edu/stem/internal/levels"
)

// Lengths are checked apart from the patterns: a counted repetition such as
// {0,254} compiles into that many regexp instructions at start-up, and
// stem-mcp (which links this package for the SSH gate) starts once per
// connection.
var (
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) // at most 64
	grantIDRE  = regexp.MustCompile(`^g[0-9a-f]{16}$`)
	instanceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) // at most 128
	// from= patterns: hosts, addresses, CIDR, wildcards, negation, commas.
	fromRE = regexp.MustCompile(`^[A-Za-z0-9.:*?!/,_-]+$`) // at most 512
	// Paths written into the forced command: sshd runs it with the user's
	// shell, so only characters that need no quoting are accepted.
	shellSafeRE = regexp.MustCompile(`^/[A-Za-z0-9/._+-]*$`)
)

// ValidName checks a grant name.
func ValidName(s string) error {
	if len(s) > 64 || !nameRE.MatchString(s) {
		return fmt.Errorf("invalid grant name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", s)
	}
	return nil
}

// ValidGrantID checks the shape of a grant ID.
func ValidGrantID(s string) bool { return grantIDRE.MatchString(s) }

// ValidInstance checks an instance name as it may appear in a grant or in
// the gate's `mcp INSTANCE` verb.
func ValidInstance(s string) error {
	if len(s) > 128 || !instanceRE.MatchString(s) || strings.Contains(s, "..") {
		return fmt.Errorf("invalid instance name %q: use letters, digits, '.', '_' or '-' (no '..'), for example hazard3-sim-inf-bss-t4", s)
	}
	return nil
}

func newGrantID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random grant id: %w", err)
	}
	return "g" + hex.EncodeToString(b[:]), nil
}

// GateCommand is the forced command for a grant. configDirArg is "" when
// the gate finds the grants in its default place ($HOME/.config/stem with
// the HOME sshd sets from passwd); otherwise it is carried explicitly.
func GateCommand(mcpBinary, grantID, configDirArg string) (string, error) {
	if !shellSafeRE.MatchString(mcpBinary) {
		return "", fmt.Errorf("stem-mcp path %q must be absolute and contain only letters, digits and /._+- (sshd runs the forced command through the shell): install stem-mcp somewhere like /usr/local/bin or set STEM_MCP_BIN", mcpBinary)
	}
	if !ValidGrantID(grantID) {
		return "", fmt.Errorf("invalid grant id %q", grantID)
	}
	cmd := mcpBinary + " gate --grant " + grantID
	if configDirArg != "" {
		if !shellSafeRE.MatchString(configDirArg) {
			return "", fmt.Errorf("config directory %q must be absolute and contain only letters, digits and /._+- to be named in authorized_keys", configDirArg)
		}
		cmd += " --config-dir " + configDirArg
	}
	return cmd, nil
}

// DefaultConfigDir is where the gate looks for grants when the forced
// command names no directory: the passwd home's .config/stem (sshd sets
// HOME from passwd and passes no XDG variables).
func DefaultConfigDir(home string) string { return filepath.Join(home, ".config", "stem") }

// ConfigDirArg returns the --config-dir value a forced command needs so the
// gate finds configDir: "" when configDir is the passwd default.
func ConfigDirArg(configDir string) (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("look up the current user: %w", err)
	}
	if filepath.Clean(configDir) == DefaultConfigDir(u.HomeDir) {
		return "", nil
	}
	return filepath.Clean(configDir), nil
}

// ParseExpiry reads --expires: an RFC 3339 time, "YYYY-MM-DD HH:MM" or
// "YYYY-MM-DDTHH:MM" (local time), a date "YYYY-MM-DD" (the grant lasts
// through that local day), or a duration from now ("90m", "8h", "14d").
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	var t time.Time
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 {
			t = now.Add(time.Duration(d) * 24 * time.Hour)
		}
	}
	if t.IsZero() {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			t = now.Add(d)
		}
	}
	if t.IsZero() {
		if v, err := time.Parse(time.RFC3339, s); err == nil {
			t = v
		}
	}
	if t.IsZero() {
		for _, layout := range []string{"2006-01-02 15:04", "2006-01-02T15:04"} {
			if v, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
				t = v
				break
			}
		}
	}
	if t.IsZero() {
		if v, err := time.ParseInLocation("2006-01-02", s, now.Location()); err == nil {
			t = v.AddDate(0, 0, 1)
		}
	}
	if t.IsZero() {
		return time.Time{}, fmt.Errorf("cannot read expiry %q: use 2025-06-30, \"2025-06-30 18:00\", an RFC 3339 time, or a duration such as 8h or 14d", s)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("expiry %s is not in the future", t.Format(time.RFC3339))
	}
	return t.Truncate(time.Second).UTC(), nil
}

// Manager edits grants and authorized_keys together.
type Manager struct {
	Store          *Store
	AuthorizedKeys string // path of the authorized_keys file to edit
	MCPBinary      string // absolute path of stem-mcp, written into lines
	ConfigDirArg   string // see GateCommand
	// Env is recorded in the store for the gate (XDG_RUNTIME_DIR,
	// STEM_STATE_DIR, STEM_CONFIG_DIR, STEM_WORKSPACE, ...).
	Env     map[string]string
	Audit   *audit.Log // nil: not audited (tests of pure logic only)
	Account string
	Now     func() time.Time
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// GrantRequest is `stemctl access grant`.
type GrantRequest struct {
	Name      string
	PublicKey string // the content of the teacher's .pub file: one key line
	Level     string
	Instances []string
	From      string
	Expires   time.Time
}

// ParsePublicKey reads a .pub file's content: exactly one plain key line
// (no options: this tool writes the options itself).
func ParsePublicKey(text string) (ssh.PublicKey, error) {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			lines = append(lines, t)
		}
	}
	if len(lines) != 1 {
		return nil, fmt.Errorf("the key file must hold exactly one public key line (found %d): give the teacher's .pub file, made with `stemctl access keygen`", len(lines))
	}
	key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(lines[0]))
	if err != nil {
		if strings.Contains(lines[0], "PRIVATE KEY") {
			return nil, errors.New("this is a private key: give the public half (the .pub file) and keep the private key on the teacher's machine")
		}
		return nil, fmt.Errorf("not an SSH public key: %w", err)
	}
	if len(opts) > 0 {
		return nil, fmt.Errorf("the key line already has options (%s): give the bare .pub line; stem writes the restrictions itself", strings.Join(opts, ","))
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, errors.New("certificates are not accepted as automation keys: give the plain public key")
	}
	if key.Type() == ssh.KeyAlgoDSA {
		return nil, errors.New("DSA keys are obsolete and refused: make an ed25519 key with `stemctl access keygen`")
	}
	return key, nil
}

// Line renders the authorized_keys line for g.
func (g Grant) Line(key ssh.PublicKey) string {
	opts := []string{"restrict", `command="` + g.Command + `"`}
	if g.From != "" {
		opts = append(opts, `from="`+g.From+`"`)
	}
	if !g.Expires.IsZero() {
		// sshd enforces this too; Z makes it UTC whatever the host's zone.
		opts = append(opts, `expiry-time="`+g.Expires.UTC().Format("20060102150405")+`Z"`)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	return strings.Join(opts, ",") + " " + pub + " stem-grant:" + g.Name
}

// Grant adds a grant and its authorized_keys line.
func (m *Manager) Grant(ctx context.Context, req GrantRequest) (Grant, error) {
	if err := ValidName(req.Name); err != nil {
		return Grant{}, err
	}
	level, err := levels.Parse(req.Level)
	if err != nil {
		return Grant{}, fmt.Errorf("access level: %w", err)
	}
	key, err := ParsePublicKey(req.PublicKey)
	if err != nil {
		return Grant{}, err
	}
	seen := map[string]bool{}
	var instances []string
	for _, in := range req.Instances {
		if err := ValidInstance(in); err != nil {
			return Grant{}, err
		}
		if !seen[in] {
			seen[in] = true
			instances = append(instances, in)
		}
	}
	if req.From != "" && (len(req.From) > 512 || !fromRE.MatchString(req.From)) {
		return Grant{}, fmt.Errorf("invalid --from %q: give comma-separated host or address patterns (for example 192.168.1.0/24,*.lab.example)", req.From)
	}
	now := m.now()
	if !req.Expires.IsZero() && !req.Expires.After(now) {
		return Grant{}, fmt.Errorf("expiry %s is not in the future", req.Expires.Format(time.RFC3339))
	}
	id, err := newGrantID()
	if err != nil {
		return Grant{}, err
	}
	command, err := GateCommand(m.MCPBinary, id, m.ConfigDirArg)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{
		ID: id, Name: req.Name, Level: level.String(), Instances: instances,
		KeyFP: ssh.FingerprintSHA256(key), PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))),
		From: req.From, Expires: req.Expires, Created: now.UTC().Truncate(time.Second),
		Command: command,
	}
	var lineWritten *KeysFile
	err = m.Store.Update(ctx, func(st *State) error {
		if old, ok := st.Find(g.Name); ok {
			return fmt.Errorf("a grant named %s already exists (level %s): revoke it first with `stemctl access revoke %s`", g.Name, old.Level, g.Name)
		}
		for _, old := range st.Sorted() {
			if old.KeyFP == g.KeyFP {
				return fmt.Errorf("this key (%s) is already granted as %s; one key has one grant: revoke %s first, or use another key", g.KeyFP, old.Name, old.Name)
			}
		}
		kf, err := ReadKeysFile(m.AuthorizedKeys)
		if err != nil {
			return err
		}
		if err := kf.checkEditable(); err != nil {
			return err
		}
		if err := refuseKnownKey(kf, g.KeyFP, st); err != nil {
			return err
		}
		g.AuthorizedKeys = kf.Path
		if err := kf.write(kf.appended(g.Line(key))); err != nil {
			return err
		}
		lineWritten = kf
		for k, v := range m.Env {
			st.Env[k] = v
		}
		st.Grants[g.ID] = g
		return nil
	})
	if err != nil {
		if lineWritten != nil {
			// The line is harmless without its grant (the gate refuses an
			// unknown ID), but do not leave it behind if we can help it.
			if kf, rerr := ReadKeysFile(lineWritten.Path); rerr == nil {
				if data, n := kf.without(func(l KeyLine) bool { return l.GrantID == g.ID }); n > 0 {
					_ = kf.write(data)
				}
			}
		}
		return Grant{}, err
	}
	m.audit(ctx, audit.Entry{
		Event: audit.Grant, Grant: g.Label(), KeyFP: g.KeyFP, Level: g.Level, Result: "ok",
		Detail: describe(g),
	})
	return g, nil
}

// refuseKnownKey refuses a key that authorized_keys already lets in: sshd
// uses the first line that matches, so a second line would either never
// apply or, worse, an unrestricted line would give the automation key (and
// so every MCP client holding it) a full shell.
func refuseKnownKey(kf *KeysFile, fp string, st *State) error {
	for _, l := range kf.ForKey(fp) {
		switch {
		case l.Stem:
			if g, ok := st.Grants[l.GrantID]; ok {
				return fmt.Errorf("this key is already in %s line %d for grant %s: revoke it first (`stemctl access revoke %s`)", kf.Path, l.Num, g.Name, g.Name)
			}
			return fmt.Errorf("this key is already in %s line %d for grant %s, which no longer exists: delete that line, then grant again", kf.Path, l.Num, l.GrantID)
		case !l.HasCommand:
			return fmt.Errorf("this key already logs in with a shell (%s line %d has no forced command): it looks like the teacher's ordinary key, which must never be an automation key; make a separate key with `stemctl access keygen --name NAME` on the teacher's machine and grant that", kf.Path, l.Num)
		default:
			return fmt.Errorf("this key is already in %s line %d with another forced command (%q); sshd would use that line: remove it first or use a separate key", kf.Path, l.Num, l.Command)
		}
	}
	return nil
}

func describe(g Grant) string {
	parts := []string{"instances=" + strings.Join(g.Instances, ",")}
	if len(g.Instances) == 0 {
		parts[0] = "instances=*"
	}
	if g.From != "" {
		parts = append(parts, "from="+g.From)
	}
	if !g.Expires.IsZero() {
		parts = append(parts, "expires="+g.Expires.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " ")
}

func (m *Manager) audit(ctx context.Context, e audit.Entry) {
	if m.Audit == nil {
		return
	}
	e.Account = m.Account
	// An audit failure must not undo a revoke; it is reported by `audit verify`.
	_, _ = m.Audit.Append(ctx, e)
}

// Revoke removes the grant named or numbered ref and every authorized_keys
// line that forces its ID. It returns the grant and how many lines went.
func (m *Manager) Revoke(ctx context.Context, ref string) (Grant, int, error) {
	var g Grant
	removed := 0
	var lineLeft error
	err := m.Store.Update(ctx, func(st *State) error {
		var ok bool
		g, ok = st.Find(ref)
		if !ok {
			return fmt.Errorf("no grant named %q: see `stemctl access list`", ref)
		}
		if g.ID != ref {
			// A hand-edited store may name two grants alike: revoking
			// one of them by chance is not what was asked.
			if named := st.Named(ref); len(named) > 1 {
				ids := make([]string, len(named))
				for i, n := range named {
					ids[i] = n.ID
				}
				return fmt.Errorf("%d grants are named %s (IDs %s): revoke one by its ID", len(named), ref, strings.Join(ids, ", "))
			}
		}
		path := g.AuthorizedKeys
		if path == "" {
			path = m.AuthorizedKeys
		}
		kf, err := ReadKeysFile(path)
		if err == nil {
			err = kf.checkEditable()
		}
		if err != nil {
			// Revoking must work even when the file cannot be edited:
			// without its grant the gate refuses the key.
			lineLeft = err
			delete(st.Grants, g.ID)
			return nil
		}
		data, n := kf.without(func(l KeyLine) bool { return l.Stem && l.GrantID == g.ID })
		if n > 0 {
			// The line goes first: once it is gone the key cannot log in,
			// whatever happens to the store afterwards.
			if err := kf.write(data); err != nil {
				return err
			}
		}
		removed = n
		delete(st.Grants, g.ID)
		return nil
	})
	if err != nil {
		return Grant{}, 0, err
	}
	detail := fmt.Sprintf("removed %d authorized_keys line(s)", removed)
	if lineLeft != nil {
		detail = "grant removed, line left in place: " + lineLeft.Error()
	}
	m.audit(ctx, audit.Entry{
		Event: audit.Revoke, Grant: g.Label(), KeyFP: g.KeyFP, Level: g.Level, Result: "ok", Detail: detail,
	})
	if lineLeft != nil {
		return g, 0, fmt.Errorf("grant %s is revoked (the gate now refuses its key), but its authorized_keys line is still there: %w", g.Name, lineLeft)
	}
	return g, removed, nil
}

// GrantStatus is a grant as `access list` shows it.
type GrantStatus struct {
	Grant
	Expired bool `json:"expired"`
	Lines   int  `json:"authorized_keys_lines"` // lines forcing this grant's ID
}

// List returns every grant with whether its line is in place.
func (m *Manager) List(ctx context.Context) ([]GrantStatus, error) {
	st, err := m.Store.Load(ctx)
	if err != nil {
		return nil, err
	}
	files := map[string]*KeysFile{}
	var out []GrantStatus
	for _, g := range st.Sorted() {
		gs := GrantStatus{Grant: g, Expired: g.Expired(m.now())}
		path := g.AuthorizedKeys
		if path == "" {
			path = m.AuthorizedKeys
		}
		kf, ok := files[path]
		if !ok {
			if kf, err = ReadKeysFile(path); err != nil {
				return nil, err
			}
			files[path] = kf
		}
		for _, l := range kf.Lines {
			if l.Stem && l.GrantID == g.ID {
				gs.Lines++
			}
		}
		out = append(out, gs)
	}
	return out, nil
}
