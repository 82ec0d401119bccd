package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LoginPath is the PATH a login shell of an ordinary account gets.
const LoginPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// minUID is the first uid of an ordinary account (UID_MIN): lab never
// prepares or removes a system account.
const minUID = 1000

// nameRE is what useradd accepts by default and a roster takes as a
// student's name.
var nameRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// ValidName says why name cannot be a student's account, or nil.
func ValidName(name string) error {
	if !nameRE.MatchString(name) || name == "root" {
		return fmt.Errorf("account name %q: use lower-case letters, digits, '-' and '_' (at most 32, starting with a letter), e.g. anna or anna_k", name)
	}
	return nil
}

// Account is an existing student account.
type Account struct {
	Name     string
	UID, GID int
	Groups   []uint32
	Home     string
}

// Lookup finds an account by name; it refuses system accounts.
func Lookup(name string) (*Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("account %q: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("account %s has a non-numeric uid or gid (%s:%s)", u.Username, u.Uid, u.Gid)
	}
	a := &Account{Name: u.Username, UID: uid, GID: gid, Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				a.Groups = append(a.Groups, uint32(n))
			}
		}
	}
	return a, nil
}

// ordinary refuses root and system accounts: lab changes the accounts
// it is given, and those are not a student's.
func (a *Account) ordinary() error {
	if a.UID < minUID {
		return fmt.Errorf("account %s has uid %d: a system account, not a student's (lab only touches uids from %d)", a.Name, a.UID, minUID)
	}
	return nil
}

// Runtime is the account's XDG_RUNTIME_DIR.
func (a *Account) Runtime() string { return fmt.Sprintf("/run/user/%d", a.UID) }

// Env is the account's login environment.
func (a *Account) Env() []string {
	return []string{"HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "PATH=" + LoginPath,
		"XDG_RUNTIME_DIR=" + a.Runtime(), "LANG=C.UTF-8"}
}

// Command runs a program as the account, with its login environment,
// from its home. Whatever root does inside a student's home goes through
// this: the home is the student's, and a symbolic link there must not
// make root write elsewhere.
func (a *Account) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = a.Env()
	cmd.Dir = a.Home
	groups := a.Groups
	if groups == nil {
		groups = []uint32{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}}
	return cmd
}

// run runs cmd with stdin and returns its trimmed stdout; an error
// carries the command and its stderr's last line.
func run(cmd *exec.Cmd, stdin io.Reader) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, lastLine(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// root runs a program as root (lab's own process) with a timeout.
func root(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return run(exec.CommandContext(ctx, name, args...), stdin)
}

// as runs a program as the account with a timeout.
func (a *Account) as(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return run(a.Command(ctx, name, args...), stdin)
}

// readFile reads a file of the account's as the account ("" and false
// when it cannot).
func (a *Account) readFile(ctx context.Context, path string) (string, bool) {
	out, err := a.as(ctx, nil, "cat", "--", path)
	return out, err == nil
}

// writeFile writes a file of the account's as the account, making its
// directory.
func (a *Account) writeFile(ctx context.Context, path, data string) error {
	_, err := a.as(ctx, strings.NewReader(data), "sh", "-c", `mkdir -p -- "$(dirname -- "$1")" && cat > "$1"`, "sh", path)
	return err
}

// passwd runs a command that edits /etc/passwd, trying again while
// another process holds its lock (useradd and friends give up at once).
func passwd(ctx context.Context, name string, args ...string) error {
	delay := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := root(ctx, nil, name, args...)
		if err == nil || !strings.Contains(err.Error(), "cannot lock") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
