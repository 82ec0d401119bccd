package teacherkey

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// identityFile is one IdentityFile line of an ssh client configuration.
type identityFile struct {
	Line    int
	Value   string // as written
	Pattern string // absolute; "%" and "${" tokens that could not be expanded are "*"
	Glob    bool   // Pattern has such wildcards
}

// sshConfigIdentities reads the IdentityFile lines of home/.ssh/config.
// It is a plain line parse: Host and Match blocks are ignored (a key named
// for any host counts), and Include is not followed, so an IdentityFile in an
// included file is not seen. A missing file has no lines.
func sshConfigIdentities(home string) (string, []identityFile, error) {
	path := filepath.Join(home, ".ssh", "config")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return path, nil, nil
	}
	if err != nil {
		return path, nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var out []identityFile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		v, ok := identityValue(sc.Text())
		if !ok || strings.EqualFold(v, "none") {
			continue
		}
		pat, glob := expandIdentity(v, home)
		out = append(out, identityFile{Line: n, Value: v, Pattern: pat, Glob: glob})
	}
	if err := sc.Err(); err != nil {
		return path, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return path, out, nil
}

// identityValue returns the path of an "IdentityFile PATH" line (keyword in
// any case, separated by blanks and/or one "=", PATH optionally in double
// quotes), as ssh_config(5) writes it.
func identityValue(line string) (string, bool) {
	line = strings.TrimSpace(line)
	i := strings.IndexAny(line, " \t=")
	if i < 0 || !strings.EqualFold(line[:i], "IdentityFile") {
		return "", false
	}
	rest := strings.TrimLeft(line[i:], " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	if strings.HasPrefix(rest, `"`) {
		if j := strings.IndexByte(rest[1:], '"'); j >= 0 {
			return rest[1 : 1+j], rest[1:1+j] != ""
		}
		return "", false
	}
	if f := strings.Fields(rest); len(f) > 0 {
		return f[0], true
	}
	return "", false
}

var (
	percentToken = regexp.MustCompile(`%.`)
	envToken     = regexp.MustCompile(`\$\{[^}]*\}`)
)

// expandIdentity resolves ~, %d and ${HOME} to home and %% to %. Tokens
// that depend on the connection (%h, %r, %u, ...) or other variables become
// "*" so the result can still be matched as a pattern. A relative path is
// taken as relative to ~/.ssh.
func expandIdentity(v, home string) (string, bool) {
	if v == "~" || strings.HasPrefix(v, "~/") {
		v = home + v[1:]
	}
	glob := false
	v = envToken.ReplaceAllStringFunc(v, func(tok string) string {
		if tok == "${HOME}" {
			return home
		}
		glob = true
		return "*"
	})
	v = percentToken.ReplaceAllStringFunc(v, func(tok string) string {
		switch tok {
		case "%d":
			return home
		case "%%":
			return "%"
		}
		glob = true
		return "*"
	})
	if !filepath.IsAbs(v) {
		v = filepath.Join(home, ".ssh", v)
	}
	return filepath.Clean(v), glob
}

// names reports whether the IdentityFile line names one of paths.
func (id identityFile) names(paths ...string) bool {
	for _, p := range paths {
		if id.Glob {
			if ok, _ := filepath.Match(id.Pattern, p); ok {
				return true
			}
			continue
		}
		if id.Pattern == p {
			return true
		}
		if r, err := filepath.EvalSymlinks(id.Pattern); err == nil && r == p {
			return true
		}
	}
	return false
}
