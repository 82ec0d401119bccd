package proposals

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/term"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/nvim"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/sockets"
)

// Decide accepts or rejects the proposal opts.ID, after the student's yes
// on this terminal (or --yes).
func Decide(ctx context.Context, opts *Options, accept bool) error {
	it, state, err := find(ctx, opts)
	if err != nil {
		return err
	}
	ios := opts.F.IOStreams
	verb := "reject"
	if accept {
		verb = "accept"
	}
	// The answer is read from stdin, so stdin must be the terminal.
	in, isFile := ios.InFile()
	isTTY := isFile && term.IsTerminal(int(in.Fd()))
	input := "stemctl proposals"
	if opts.Yes {
		input += " --yes"
	}
	switch {
	case isTTY:
		input += " on " + proposals.TTYName(in)
	case opts.Yes:
		input += " (no terminal)"
	}
	if !opts.Yes {
		if !isTTY {
			return cmdutil.FlagErrorf("%s asks for a yes on a terminal and stdin is not one: run it in a terminal, or pass --yes", verb)
		}
		printDiff(ios.ErrOut, it, opts.Hunks)
		what := it.rec.ID
		if len(opts.Hunks) > 0 {
			what += fmt.Sprintf(" (hunk %s)", joinInts(opts.Hunks))
		}
		fmt.Fprintf(ios.ErrOut, "%s %s? [y/N] ", verb, what)
		line, _ := bufio.NewReader(ios.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(ios.ErrOut, "nothing was decided")
			return &cmdutil.ExitError{Code: 1}
		}
	}
	lg, err := opts.F.Audit()
	if err != nil {
		return err
	}
	sock := sockets.Dir{Path: it.inst.SocketDir}.Nvim()
	d := proposals.Decide{Accept: accept, Hunks: opts.Hunks, Input: input, Instance: it.inst, StateDir: state, Audit: lg,
		Dial: func(ctx context.Context) (*nvim.Client, error) { return nvim.Dial(ctx, sock, nvim.Options{}) }}
	out, err := proposals.Open(state, it.inst.Instance).Decide(ctx, it.rec, d)
	if out == nil && err != nil {
		if errors.Is(err, proposals.ErrDecided) {
			return cmdutil.FlagErrorf("%v", err)
		}
		return err
	}
	r := out.Record
	fmt.Fprintf(ios.Out, "%s %s: %s", r.ID, showLine(r.Path), r.State)
	switch out.Via {
	case "neovim":
		fmt.Fprint(ios.Out, " (applied in the open Neovim buffer; save it to keep it)")
	case "file":
		fmt.Fprint(ios.Out, " (applied to the saved file)")
	}
	fmt.Fprintln(ios.Out)
	for i, h := range r.Hunks {
		if h.State == proposals.Stale {
			fmt.Fprintf(ios.Out, "  hunk %d is stale: its lines changed since it was proposed; nothing of it was applied\n", i+1)
		}
	}
	if out.EditorNote != "" && out.Via != "neovim" {
		fmt.Fprintf(ios.ErrOut, "note: the editor was not told (%s); it may show the proposal until it restarts\n", showLine(out.EditorNote))
	}
	return err
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}
