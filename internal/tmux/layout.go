package tmux

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Layout helpers for stemctl. A pane's program is given as an argv, never
// as a shell string from a caller: with two or more elements tmux executes
// it directly (execvp); a one-element argv is run as `exec 'PROG'` by the
// default shell with the name single-quoted, so it cannot be split or
// expanded either. With no argv the pane starts the default shell, which is
// the way to start a program "as the student would": create the pane, then
// type into it with SendKeys or Run.

// NewWindowOptions describe a new window.
type NewWindowOptions struct {
	Name string   // window name, taken literally (QuoteFormat)
	Dir  string   // absolute start directory, taken literally; "" for tmux's default
	Argv []string // program to run instead of the shell
	// Select makes the new window the current one; by default it is
	// created in the background (-d) so the student's view does not jump.
	Select bool
}

// SplitOptions describe a split.
type SplitOptions struct {
	// Vertical stacks the new pane below (tmux -v); otherwise it goes to
	// the right (-h).
	Vertical bool
	// Before puts the new pane above or to the left (-b).
	Before bool
	// Percent is the new pane's share of the split pane, 1..99; 0 for half.
	Percent int
	Dir     string
	Argv    []string
	// Select makes the new pane active; by default the split keeps the
	// student's active pane (-d).
	Select bool
}

// NewPane is what creating a window or pane returns.
type NewPane struct {
	Pane   PaneID   `json:"pane"`
	Window WindowID `json:"window"`
}

// programArgs turns argv and dir into quoted new-window/split-window
// arguments.
func programArgs(dir string, argv []string) (string, error) {
	var b strings.Builder
	if dir != "" {
		if !strings.HasPrefix(dir, "/") {
			return "", fmt.Errorf("%w: start directory %q must be absolute", ErrInvalidArgument, dir)
		}
		q, err := QuoteFormat(dir)
		if err != nil {
			return "", err
		}
		b.WriteString(" -c " + q)
	}
	if len(argv) == 0 {
		return b.String(), nil
	}
	if argv[0] == "" {
		return "", fmt.Errorf("%w: empty program name", ErrInvalidArgument)
	}
	if len(argv) == 1 {
		argv = []string{"exec " + shellQuote(argv[0])}
	}
	// "--" ends tmux's flags, so an argument starting with "-" is the
	// program's, not split-window's.
	b.WriteString(" --")
	for _, a := range argv {
		q, err := Quote(a)
		if err != nil {
			return "", err
		}
		b.WriteString(" " + q)
	}
	return b.String(), nil
}

const newPaneFormat = "#{pane_id} #{window_id}"

func parseNewPane(out string) (NewPane, error) {
	p, w, ok := strings.Cut(strings.TrimSpace(out), " ")
	if !ok {
		return NewPane{}, fmt.Errorf("%w: new pane answer %q", ErrProtocol, out)
	}
	pane, err := ParsePaneID(p)
	if err != nil {
		return NewPane{}, fmt.Errorf("%w: new pane answer %q", ErrProtocol, out)
	}
	win, err := ParseWindowID(w)
	if err != nil {
		return NewPane{}, fmt.Errorf("%w: new pane answer %q", ErrProtocol, out)
	}
	return NewPane{Pane: pane, Window: win}, nil
}

// NewWindow creates a window at the next free index of the attached session.
func (c *Client) NewWindow(ctx context.Context, opt NewWindowOptions) (NewPane, error) {
	cmd := "new-window -P -F " + mustQuote(newPaneFormat) + " -t " + mustQuote(c.session+":")
	if !opt.Select {
		cmd += " -d"
	}
	if opt.Name != "" {
		q, err := QuoteFormat(opt.Name)
		if err != nil {
			return NewPane{}, err
		}
		cmd += " -n " + q
	}
	args, err := programArgs(opt.Dir, opt.Argv)
	if err != nil {
		return NewPane{}, err
	}
	out, err := c.command(ctx, cmd+args)
	if err != nil {
		return NewPane{}, fmt.Errorf("tmux: new-window: %w", err)
	}
	return parseNewPane(out)
}

// SplitPane splits target and returns the new pane.
func (c *Client) SplitPane(ctx context.Context, target PaneID, opt SplitOptions) (NewPane, error) {
	if err := target.check(); err != nil {
		return NewPane{}, err
	}
	cmd := "split-window -P -F " + mustQuote(newPaneFormat) + " -t " + string(target)
	if opt.Vertical {
		cmd += " -v"
	} else {
		cmd += " -h"
	}
	if opt.Before {
		cmd += " -b"
	}
	if !opt.Select {
		cmd += " -d"
	}
	switch {
	case opt.Percent == 0:
	case opt.Percent >= 1 && opt.Percent <= 99:
		cmd += " -l " + strconv.Itoa(opt.Percent) + "%"
	default:
		return NewPane{}, fmt.Errorf("%w: percent %d (1..99)", ErrInvalidArgument, opt.Percent)
	}
	args, err := programArgs(opt.Dir, opt.Argv)
	if err != nil {
		return NewPane{}, err
	}
	out, err := c.command(ctx, cmd+args)
	if err != nil {
		return NewPane{}, fmt.Errorf("tmux: split-window: %w", err)
	}
	return parseNewPane(out)
}

// SelectPane makes pane the active pane of its window.
func (c *Client) SelectPane(ctx context.Context, pane PaneID) error {
	if err := pane.check(); err != nil {
		return err
	}
	if _, err := c.command(ctx, "select-pane -t "+string(pane)); err != nil {
		return fmt.Errorf("tmux: select-pane: %w", err)
	}
	return nil
}

// SelectWindow makes window the current window of its session.
func (c *Client) SelectWindow(ctx context.Context, window WindowID) error {
	if err := window.check(); err != nil {
		return err
	}
	if _, err := c.command(ctx, "select-window -t "+string(window)); err != nil {
		return fmt.Errorf("tmux: select-window: %w", err)
	}
	return nil
}

// RenameWindow sets a window's name. Any text is taken literally (quoted
// with QuoteFormat, after "--"); tmux itself then escapes backslashes and
// control characters in the stored name (rename-window, unlike
// new-window -n, goes through its name sanitizer).
func (c *Client) RenameWindow(ctx context.Context, window WindowID, name string) error {
	if err := window.check(); err != nil {
		return err
	}
	q, err := QuoteFormat(name)
	if err != nil {
		return err
	}
	if _, err := c.command(ctx, "rename-window -t "+string(window)+" -- "+q); err != nil {
		return fmt.Errorf("tmux: rename-window: %w", err)
	}
	return nil
}

// SetPaneOption sets a pane user option (a name starting with '@', such as
// @stem_role). Only user options can be set here: tmux's own options
// include hooks and shell commands.
func (c *Client) SetPaneOption(ctx context.Context, pane PaneID, name, value string) error {
	if err := pane.check(); err != nil {
		return err
	}
	if !validUserOpt(name) {
		return fmt.Errorf("%w: option %q (user options @name only)", ErrInvalidArgument, name)
	}
	q, err := Quote(value)
	if err != nil {
		return err
	}
	if _, err := c.command(ctx, "set-option -p -t "+string(pane)+" "+name+" "+q); err != nil {
		return fmt.Errorf("tmux: set-option %s: %w", name, err)
	}
	return nil
}

// UnsetPaneOption removes a pane user option.
func (c *Client) UnsetPaneOption(ctx context.Context, pane PaneID, name string) error {
	if err := pane.check(); err != nil {
		return err
	}
	if !validUserOpt(name) {
		return fmt.Errorf("%w: option %q (user options @name only)", ErrInvalidArgument, name)
	}
	if _, err := c.command(ctx, "set-option -p -u -t "+string(pane)+" "+name); err != nil {
		return fmt.Errorf("tmux: set-option -u %s: %w", name, err)
	}
	return nil
}

// KillPane closes a pane (its program gets SIGHUP).
func (c *Client) KillPane(ctx context.Context, pane PaneID) error {
	if err := pane.check(); err != nil {
		return err
	}
	if _, err := c.command(ctx, "kill-pane -t "+string(pane)); err != nil {
		return fmt.Errorf("tmux: kill-pane: %w", err)
	}
	return nil
}
