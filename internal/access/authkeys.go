package access

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/sockets"
)

// maxKeysFile bounds what we are willing to parse and rewrite.
const maxKeysFile = 4 << 20

// KeysFile is an authorized_keys file held as its exact bytes plus a parse
// of every line. Edits splice bytes, so lines we do not touch stay
// byte-for-byte identical (comments, options, odd spacing, CRLF).
type KeysFile struct {
	Path   string // the file written (symlinks resolved)
	Data   []byte
	Mode   os.FileMode
	Exists bool
	Lines  []KeyLine
}

// KeyLine is one line of an authorized_keys file.
type KeyLine struct {
	Num        int // 1-based
	Start, End int // byte span in Data, End includes the newline if any
	Text       string
	Blank      bool  // empty or a comment
	Err        error // the line holds no key we can read (malformed)
	Key        ssh.PublicKey
	FP         string // SHA256 fingerprint
	Options    []string
	Comment    string
	Command    string // value of command="...", dequoted
	HasCommand bool
	Restrict   bool
	CertAuth   bool   // cert-authority: the key signs certificates, it does not log in
	GrantID    string // set when the forced command is stem's gate
	Stem       bool   // the forced command runs stem-mcp gate
}

// ReadKeysFile reads and parses path. A missing file is an empty file.
func ReadKeysFile(path string) (*KeysFile, error) {
	real, err := resolvePath(path)
	if err != nil {
		return nil, err
	}
	kf := &KeysFile{Path: real, Mode: 0o600}
	fi, err := os.Stat(real)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return kf, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", real)
	case fi.Size() > maxKeysFile:
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d this tool edits; tidy it by hand", real, fi.Size(), maxKeysFile)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s belongs to uid %d, not to you (uid %d): edit it as its owner", real, st.Uid, os.Geteuid())
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", real, err)
	}
	kf.Data, kf.Mode, kf.Exists = data, fi.Mode().Perm(), true
	kf.Lines = parseKeyLines(data)
	return kf, nil
}

// resolvePath follows a symlinked authorized_keys to its target so an edit
// replaces the target and keeps the link (dotfile managers use links).
func resolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("authorized_keys path %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, os.ErrNotExist) {
		// A dangling link would be replaced by a file; refuse that.
		if fi, lerr := os.Lstat(abs); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("%s is a symlink to a missing file: fix or remove the link first", abs)
		}
		return abs, nil
	}
	if err != nil {
		return "", fmt.Errorf("authorized_keys path %s: %w", path, err)
	}
	return real, nil
}

func parseKeyLines(data []byte) []KeyLine {
	var lines []KeyLine
	for start, num := 0, 1; start < len(data); num++ {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start + 1
		}
		text := strings.TrimRight(string(data[start:end]), "\r\n")
		lines = append(lines, parseKeyLine(num, start, end, text))
		start = end
	}
	return lines
}

func parseKeyLine(num, start, end int, text string) KeyLine {
	l := KeyLine{Num: num, Start: start, End: end, Text: text}
	trimmed := strings.TrimSpace(text)
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		l.Blank = true
		return l
	}
	if strings.IndexByte(trimmed, 0) >= 0 {
		l.Err = errors.New("contains a NUL byte")
		return l
	}
	// ParseAuthorizedKey skips unparseable lines and goes on to the next one;
	// feeding it exactly one line makes a bad line an error instead.
	key, comment, opts, rest, err := ssh.ParseAuthorizedKey([]byte(trimmed))
	if err != nil {
		l.Err = err
		return l
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		l.Err = errors.New("trailing data after the key")
		return l
	}
	l.Key, l.Comment, l.Options = key, comment, opts
	l.FP = ssh.FingerprintSHA256(key)
	for _, o := range opts {
		name, val, hasVal := strings.Cut(o, "=")
		switch strings.ToLower(name) {
		case "restrict":
			l.Restrict = true
		case "cert-authority":
			l.CertAuth = true
		case "command":
			if hasVal {
				l.HasCommand, l.Command = true, dequote(val)
			}
		}
	}
	if l.HasCommand {
		l.GrantID, l.Stem = parseGateCommand(l.Command)
	}
	return l
}

// dequote undoes authorized_keys option quoting the way sshd does: strip the
// surrounding quotes and turn \" into ".
func dequote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	return strings.ReplaceAll(v, `\"`, `"`)
}

// parseGateCommand recognises `/path/stem-mcp gate --grant ID [...]`.
func parseGateCommand(cmd string) (grantID string, stem bool) {
	f := strings.Fields(cmd)
	if len(f) < 2 || filepath.Base(f[0]) != "stem-mcp" || f[1] != "gate" {
		return "", false
	}
	for i := 2; i+1 < len(f); i++ {
		if f[i] == "--grant" {
			return f[i+1], true
		}
	}
	return "", true
}

// Malformed returns the first line that holds no readable key, if any.
func (kf *KeysFile) Malformed() (KeyLine, bool) {
	for _, l := range kf.Lines {
		if !l.Blank && l.Err != nil {
			return l, true
		}
	}
	return KeyLine{}, false
}

// checkEditable refuses to rewrite a file we cannot fully read: sshd may
// understand something we do not, and rewriting it blindly could change
// who can log in.
func (kf *KeysFile) checkEditable() error {
	if l, bad := kf.Malformed(); bad {
		return fmt.Errorf("%s line %d is not a key line this tool can read (%v); nothing was changed: fix or comment out that line, then retry", kf.Path, l.Num, l.Err)
	}
	return nil
}

// ForKey returns the lines (not cert-authority) that authorize key fp.
func (kf *KeysFile) ForKey(fp string) []KeyLine {
	var out []KeyLine
	for _, l := range kf.Lines {
		if l.Key != nil && !l.CertAuth && l.FP == fp {
			out = append(out, l)
		}
	}
	return out
}

// appended returns the file content with line added at the end.
func (kf *KeysFile) appended(line string) []byte {
	out := make([]byte, 0, len(kf.Data)+len(line)+2)
	out = append(out, kf.Data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, line...)
	return append(out, '\n')
}

// without returns the file content with the given lines cut out; every
// other byte is kept.
func (kf *KeysFile) without(drop func(KeyLine) bool) ([]byte, int) {
	out := make([]byte, 0, len(kf.Data))
	n := 0
	for _, l := range kf.Lines {
		if drop(l) {
			n++
			continue
		}
		out = append(out, kf.Data[l.Start:l.End]...)
	}
	return out, n
}

// write replaces the file atomically with data, keeping its mode. It
// re-reads the file first and gives up if someone else changed it since
// it was parsed, rather than losing their edit.
func (kf *KeysFile) write(data []byte) error {
	cur, err := os.ReadFile(kf.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if kf.Exists {
			return fmt.Errorf("%s disappeared while it was being edited; retry", kf.Path)
		}
	case err != nil:
		return fmt.Errorf("re-read %s: %w", kf.Path, err)
	case !kf.Exists || !bytes.Equal(cur, kf.Data):
		return fmt.Errorf("%s changed while it was being edited; nothing was written: retry", kf.Path)
	}
	dir := filepath.Dir(kf.Path)
	if !kf.Exists {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	return sockets.WriteFileAtomic(kf.Path, data, kf.Mode)
}
