package tmux

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/termtext"
)

// Key is one element of input for SendKeys: either literal Text (any bytes
// except NUL, sent byte by byte as hex with `send-keys -H`, so tmux never
// parses it) or a Name from the allowlist (see KeyNames), pressed Repeat
// times (0 means once).
type Key struct {
	Text   string `json:"text,omitempty"`
	Name   string `json:"name,omitempty"`
	Repeat int    `json:"repeat,omitempty"`
}

// Limits for keys.
const (
	MaxKeySpec   = 16 << 10 // bytes of a ParseKeys spec
	MaxKeyBytes  = 64 << 10 // literal bytes in one SendKeys call
	MaxKeyNamed  = 1024     // named key presses in one SendKeys call
	MaxKeyRepeat = 100
)

// keyNames maps lower-cased accepted names to tmux key names.
var keyNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Enter", "Tab", "BTab", "Escape", "BSpace", "Space",
		"Up", "Down", "Left", "Right", "Home", "End", "PageUp", "PageDown",
		"Insert", "Delete",
	} {
		m[strings.ToLower(k)] = k
	}
	for i := 1; i <= 12; i++ {
		k := "F" + strconv.Itoa(i)
		m[strings.ToLower(k)] = k
	}
	for c := 'a'; c <= 'z'; c++ {
		k := "C-" + string(c)
		m[strings.ToLower(k)] = k
	}
	for alias, k := range map[string]string{
		"return": "Enter", "esc": "Escape", "backspace": "BSpace", "bs": "BSpace",
		"pgup": "PageUp", "pgdn": "PageDown", "del": "Delete", "ins": "Insert",
	} {
		m[alias] = k
	}
	return m
}()

// KeyNames lists the canonical named keys SendKeys accepts, sorted (not in
// the order of the map they come from).
func KeyNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keyNames {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// LookupKey returns the canonical tmux name for an accepted key name
// (case-insensitive; aliases such as Esc, Return, Backspace, PgUp).
func LookupKey(name string) (string, bool) {
	k, ok := keyNames[strings.ToLower(name)]
	return k, ok
}

// ParseKeys parses the key notation agents write:
//
//	make{Enter}          the text "make", then the Enter key
//	{C-c}                Ctrl-C; {Up 3} presses Up three times (1..100)
//	a{{b}                the text "a{b}": "{{" is a literal "{"; "}" is
//	                     always literal outside a key name
//
// Key names are those of KeyNames (case-insensitive, with a few aliases).
// All other characters, including newlines, are literal text. The spec is
// at most MaxKeySpec bytes of valid UTF-8 without NUL, with at most
// MaxKeyNamed key presses; a spec ParseKeys accepts is always one SendKeys
// accepts.
func ParseKeys(spec string) ([]Key, error) {
	if len(spec) > MaxKeySpec {
		return nil, fmt.Errorf("%w: key spec of %d bytes (limit %d)", ErrInvalidArgument, len(spec), MaxKeySpec)
	}
	if !utf8.ValidString(spec) {
		return nil, fmt.Errorf("%w: key spec is not valid UTF-8", ErrInvalidArgument)
	}
	if strings.IndexByte(spec, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL byte in key spec", ErrInvalidArgument)
	}
	var keys []Key
	presses := 0
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			keys = append(keys, Key{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(spec); {
		c := spec[i]
		if c != '{' {
			text.WriteByte(c)
			i++
			continue
		}
		if i+1 < len(spec) && spec[i+1] == '{' {
			text.WriteByte('{')
			i += 2
			continue
		}
		end := strings.IndexByte(spec[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%w: unterminated { at byte %d (write {{ for a literal brace)", ErrInvalidArgument, i)
		}
		inner := spec[i+1 : i+end]
		name, count, hasCount := strings.Cut(inner, " ")
		k, ok := LookupKey(name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown key {%s} at byte %d", ErrInvalidArgument, termtext.Clip(inner, 32), i)
		}
		rep := 0
		if hasCount {
			n, err := strconv.Atoi(count)
			if err != nil || n < 1 || n > MaxKeyRepeat {
				return nil, fmt.Errorf("%w: repeat count %q in {%s} (1..%d)", ErrInvalidArgument, termtext.Clip(count, 16), name, MaxKeyRepeat)
			}
			rep = n
		}
		presses += max(rep, 1)
		if presses > MaxKeyNamed {
			return nil, fmt.Errorf("%w: more than %d key presses", ErrInvalidArgument, MaxKeyNamed)
		}
		flush()
		keys = append(keys, Key{Name: k, Repeat: rep})
		i += end + 1
	}
	flush()
	return keys, nil
}

// sendKeysCommands turns keys into send-keys commands for pane. Nothing
// from a Key reaches tmux's parser except hex digits and allowlisted names.
func sendKeysCommands(pane PaneID, keys []Key) ([]string, error) {
	const chunk = 512 // bytes per send-keys -H
	var cmds []string
	literal, named := 0, 0
	for _, k := range keys {
		switch {
		case k.Name != "" && k.Text != "":
			return nil, fmt.Errorf("%w: key with both text and name", ErrInvalidArgument)
		case k.Name != "":
			name, ok := LookupKey(k.Name)
			if !ok {
				return nil, fmt.Errorf("%w: key name %q is not allowed", ErrInvalidArgument, termtext.Clip(k.Name, 32))
			}
			if k.Repeat < 0 || k.Repeat > MaxKeyRepeat {
				return nil, fmt.Errorf("%w: repeat %d (0..%d)", ErrInvalidArgument, k.Repeat, MaxKeyRepeat)
			}
			named += max(k.Repeat, 1)
			cmd := "send-keys -t " + string(pane)
			if k.Repeat > 1 {
				cmd += " -N " + strconv.Itoa(k.Repeat)
			}
			cmds = append(cmds, cmd+" "+name)
		case k.Text != "":
			if strings.IndexByte(k.Text, 0) >= 0 {
				return nil, fmt.Errorf("%w: NUL byte in key text", ErrInvalidArgument)
			}
			if k.Repeat > 1 {
				return nil, fmt.Errorf("%w: repeat applies to named keys only", ErrInvalidArgument)
			}
			literal += len(k.Text)
			for s := k.Text; s != ""; {
				n := min(len(s), chunk)
				var b strings.Builder
				b.WriteString("send-keys -t ")
				b.WriteString(string(pane))
				b.WriteString(" -H")
				for i := 0; i < n; i++ {
					fmt.Fprintf(&b, " %02x", s[i])
				}
				cmds = append(cmds, b.String())
				s = s[n:]
			}
		}
	}
	if literal > MaxKeyBytes {
		return nil, fmt.Errorf("%w: %d bytes of text (limit %d)", ErrInvalidArgument, literal, MaxKeyBytes)
	}
	if named > MaxKeyNamed {
		return nil, fmt.Errorf("%w: %d key presses (limit %d)", ErrInvalidArgument, named, MaxKeyNamed)
	}
	return cmds, nil
}

// SendKeys types keys into a pane, as the student would. It refuses a dead
// pane, a pane in copy mode (keys would drive the mode) and a window with
// synchronize-panes on (keys would reach every pane of the window).
func (c *Client) SendKeys(ctx context.Context, pane PaneID, keys []Key) error {
	if err := pane.check(); err != nil {
		return err
	}
	cmds, err := sendKeysCommands(pane, keys)
	if err != nil {
		return err
	}
	mu := c.paneLock(pane)
	mu.Lock()
	defer mu.Unlock()
	return c.sendKeysLocked(ctx, pane, cmds)
}

func (c *Client) sendKeysLocked(ctx context.Context, pane PaneID, cmds []string) error {
	st, err := c.paneState(ctx, pane)
	if err != nil {
		return err
	}
	if err := st.keysAllowed(pane); err != nil {
		return err
	}
	// Several commands per request, each request's line kept modest.
	const maxLine = 16 << 10
	for len(cmds) > 0 {
		n, size := 0, 0
		for n < len(cmds) && (n == 0 || size+len(cmds[n]) < maxLine) {
			size += len(cmds[n]) + 3
			n++
		}
		if _, err := c.exec(ctx, cmds[:n]...); err != nil {
			return fmt.Errorf("tmux: send-keys to %s: %w", pane, err)
		}
		cmds = cmds[n:]
	}
	return nil
}

func (st paneState) keysAllowed(pane PaneID) error {
	switch {
	case st.dead:
		return fmt.Errorf("%w: %s", ErrPaneDead, pane)
	case st.inMode:
		return fmt.Errorf("%w: %s", ErrPaneInMode, pane)
	case st.sync:
		return fmt.Errorf("%w: %s", ErrSynchronized, pane)
	}
	return nil
}
