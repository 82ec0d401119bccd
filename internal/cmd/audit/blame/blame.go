// Package blame implements `stemctl audit blame`.
package blame

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/provenance"
	"github.com/stem-edu/stem/internal/termtext"
	"github.com/stem-edu/stem/internal/workspace"
)

// maxFileBytes bounds the file blame reads (it is the container's to
// write).
const maxFileBytes = 16 << 20

// Options are blame's inputs.
type Options struct {
	F    *cmdutil.Factory
	File string
	JSON bool
}

// NewCmdBlame builds the command.
func NewCmdBlame(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "blame FILE",
		Short: "Show, line by line, which agent wrote a file of a card, or that it was written in the container",
		Long: `Every change an agent or a teacher makes to a file through stem-mcp (a direct
nvim_buffer_edit, an accepted proposal) is recorded in the account's state
directory, next to the audit log, with who made it (agent id or teacher
grant, level, MCP session), when, and hashes of the buffer's lines before
and of the lines it wrote. blame compares the file as it is on disk now with
those records, newest first, the way git blame walks commits: a line is an
agent's if it traces back to one of that agent's new lines (for a proposal:
"accepted by the student at" the host input that accepted it); it was
"written in the container (the student or their programs)" if it appeared
between two records or was there before the first.
This holds across saves, the student's later edits, Neovim restarts and
re-created containers, because it works on the content, not on the editor.

"container" means "not written by a change stem recorded": the student's
typing, their programs, a shell command. blame cannot see:
changes an agent at the full level makes through a shell, nvim_command or
nvim_lua; keys an agent sends to a pane (at assist, one the student marked);
an agent's own file tools writing the card directly (at full); text the
student copies from an AI elsewhere; a line the student
types again exactly as the agent wrote it, in the same place (it stays the
agent's); a line moved to another place (it becomes the container's, marked
"container *" when an agent wrote a line of the same text: moved, copied or
typed alike). A line changed in the container in any way is the container's.
A container line with the text of an agent's proposal that no host decision
accepted is marked "!" (--json: unaccepted_proposal): the agent's text got
into the file without the student's yes on the host.

FILE is a path inside a card of the workspace (absolute, or relative to the
current directory). Warnings about the records (a broken hash chain, records
removed from the end) go to stderr, and into "problems" with --json. The
security guide (docs/security.md) has the details.`,
		Example: `  stemctl audit blame t1/words.c
  stemctl audit blame ~/dev/workspace/stem/inf/bss/t4/main.S --json`,
		Args: cmdutil.ExactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.File = args[0]
			return cmdutil.RunOr(cmd.Context(), opts, runF, Run)
		},
	}
	cmdutil.AddJSONFlag(cmd, &opts.JSON)
	return cmd
}

// Run blames.
func Run(ctx context.Context, opts *Options) error {
	ws, err := opts.F.Workspace()
	if err != nil {
		return err
	}
	card, rel, err := Locate(ws, opts.File)
	if err != nil {
		return err
	}
	dirs, err := opts.F.Dirs()
	if err != nil {
		return err
	}
	data, err := beneath.ReadFile(card, rel, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist in the card %s (blame reads the saved file: save it first)", rel, card)
	}
	if err != nil {
		return fmt.Errorf("read %s in the card %s: %w", rel, card, err)
	}
	h, err := provenance.Open(dirs.State).Read(card, rel)
	if err != nil {
		return err
	}
	props, err := proposals.ForFile(dirs.State, card, rel)
	if err != nil {
		return err
	}
	text := provenance.SplitFile(data)
	lines := provenance.Blame(h, text)
	un := proposals.Unaccepted(props, text, lines)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.F.IOStreams.Out, jsonReport(card, rel, h, text, lines, un))
	}
	printProblems(opts.F.IOStreams.ErrOut, rel, h)
	printLines(opts.F.IOStreams.Out, text, lines, un)
	printSummary(opts.F.IOStreams.Out, rel, h, lines, un)
	return nil
}

// Locate finds the card of file and the file's path in it. Only the part
// of the path up to the card is resolved (symlinks included): what lies
// below is the container's to change, and is read without following
// anything (package beneath).
func Locate(ws *workspace.Workspace, file string) (card, rel string, err error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", file, err)
	}
	parts := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	for i := 1; i < len(parts); i++ {
		real, err := filepath.EvalSymlinks("/" + strings.Join(parts[:i], "/"))
		if err != nil {
			break
		}
		if filepath.Dir(filepath.Dir(real)) != ws.Root {
			continue
		}
		series, name := filepath.Base(filepath.Dir(real)), filepath.Base(real)
		cp, err := ws.CardPath(series, name)
		if err != nil {
			return "", "", err
		}
		return cp, strings.Join(parts[i:], "/"), nil
	}
	return "", "", cmdutil.FlagErrorf("%s is not inside a card of the workspace %s: give the path of a file in a card (SERIES/CARD/...), for example %s",
		termtext.Line(file, 200), ws.Root, filepath.Join(ws.Root, "SERIES", "CARD", "t1", "main.c"))
}

type jsonLine struct {
	N    int    `json:"n"`
	By   string `json:"by"`
	Text string `json:"text"`
	// The change that wrote the line (agent and teacher lines).
	Who         *provenance.Who `json:"who,omitempty"`
	Time        *time.Time      `json:"time,omitempty"`
	Change      int64           `json:"change,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	Proposal    string          `json:"proposal,omitempty"`
	AcceptedBy  string          `json:"accepted_by,omitempty"`
	Instance    string          `json:"instance,omitempty"`
	Unconfirmed bool            `json:"unconfirmed,omitempty"`
	// For a container line: the recorded change it appeared after.
	AfterChange int64      `json:"after_change,omitempty"`
	AfterTime   *time.Time `json:"after_time,omitempty"`
	// For a container line: a change that wrote a line of the same text,
	// which the walk did not trace to (moved, copied or typed alike).
	SameAs *sameAs `json:"same_text_as,omitempty"`
	// For a container line: an agent's proposal with this text that no
	// host decision accepted.
	Unaccepted *unaccepted `json:"unaccepted_proposal,omitempty"`
}

type unaccepted struct {
	ID       string `json:"id"`
	From     string `json:"from"`
	State    string `json:"state"`
	Instance string `json:"instance"`
}

type sameAs struct {
	Change int64           `json:"change"`
	Who    *provenance.Who `json:"who"`
	Time   time.Time       `json:"time"`
}

type report struct {
	File        string               `json:"file"`
	Card        string               `json:"card"`
	RecordsFile string               `json:"records_file"`
	Changes     int                  `json:"changes"`
	NotApplied  int                  `json:"not_applied,omitempty"`
	OlderUnread bool                 `json:"older_records_not_read,omitempty"`
	Summary     provenance.Summary   `json:"summary"`
	Lines       []jsonLine           `json:"lines"`
	Problems    []provenance.Problem `json:"problems"`
}

func jsonReport(card, rel string, h *provenance.History, text []string, lines []provenance.Line, un map[int]*proposals.Record) report {
	r := report{File: rel, Card: card, RecordsFile: h.File, Changes: len(h.Changes), NotApplied: h.NotApplied, OlderUnread: h.Older,
		Summary: provenance.Summarize(h, lines), Lines: make([]jsonLine, len(lines)), Problems: h.Problems}
	if r.Problems == nil {
		r.Problems = []provenance.Problem{}
	}
	for i, l := range lines {
		j := jsonLine{N: l.N, By: l.By, Text: strings.TrimSuffix(text[i], "\r")}
		if c := l.Change; c != nil {
			t := c.Time
			j.Who, j.Time, j.Change, j.Tool, j.Proposal, j.Instance, j.Unconfirmed = &c.Who, &t, c.Seq, c.Tool, c.Proposal, c.Instance, c.Unconfirmed
			j.AcceptedBy = c.AcceptedBy
		}
		if a := l.After; a != nil {
			t := a.Time
			j.AfterChange, j.AfterTime = a.Seq, &t
		}
		if a := l.SameAs; a != nil {
			j.SameAs = &sameAs{Change: a.Seq, Who: &a.Who, Time: a.Time}
		}
		if p := un[i]; p != nil {
			j.Unaccepted = &unaccepted{ID: p.ID, From: p.From, State: p.State, Instance: p.Instance}
		}
		r.Lines[i] = j
	}
	return r
}

func printProblems(w io.Writer, rel string, h *provenance.History) {
	for _, p := range h.Problems {
		where := "the records"
		if p.Line > 0 {
			where = fmt.Sprintf("line %d of the records", p.Line)
		}
		fmt.Fprintf(w, "warning: %s of %s: %s\n", where, rel, p.Reason)
	}
	if n := h.ProblemCount - len(h.Problems); n > 0 {
		fmt.Fprintf(w, "warning: and %d more problems (--json lists the first %d)\n", n, len(h.Problems))
	}
	if h.Older {
		fmt.Fprintf(w, "warning: the records of %s are longer than blame reads; the oldest were left out\n", rel)
	}
	if len(h.Problems) > 0 {
		fmt.Fprintf(w, "warning: the records are in %s\n", h.File)
	}
}

// printLines prints LINE WHO WHEN TEXT; the text is the container's, so
// it is sanitized, and kept on its line.
func printLines(w io.Writer, text []string, lines []provenance.Line, un map[int]*proposals.Record) {
	who := make([]string, len(lines))
	width := len(provenance.ByContainer)
	for i, l := range lines {
		switch {
		case l.Change != nil:
			who[i] = l.Change.Who.Label()
			if l.Change.AcceptedBy != "" {
				who[i] += ", accepted by " + l.Change.AcceptedBy
			}
			if l.Change.Unconfirmed {
				who[i] += "?"
			}
		case un[i] != nil:
			who[i] = l.By + " !"
		case l.SameAs != nil:
			who[i] = l.By + " *"
		default:
			who[i] = l.By
		}
		width = max(width, len(who[i]))
	}
	nw := len(fmt.Sprint(len(lines)))
	for i, l := range lines {
		when := ""
		if l.Change != nil {
			when = l.Change.Time.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(w, "%*d  %-*s  %-16s  %s\n", nw, l.N, width, termtext.Line(who[i], 0), when, showLine(text[i]))
	}
}

// showLine is a file's line for a terminal: no escape sequences or
// controls, and nothing that would start a new line.
func showLine(s string) string {
	s = termtext.String(strings.TrimSuffix(s, "\r"))
	return strings.ReplaceAll(s, "\n", " ")
}

func printSummary(w io.Writer, rel string, h *provenance.History, lines []provenance.Line, un map[int]*proposals.Record) {
	s := provenance.Summarize(h, lines)
	printUnaccepted(w, un)
	if len(h.Changes) == 0 {
		fmt.Fprintf(w, "\nno change by an agent or teacher is recorded for %s: every line was %s (as far as stem can see: stemctl audit blame --help)\n", termtext.Line(rel, 200), provenance.ContainerText)
		return
	}
	fmt.Fprintf(w, "\n%s: %s, %s (the last %s)", termtext.Line(rel, 200), plural(s.Lines, "line"), plural(len(h.Changes), "recorded change"), s.Last.Local().Format("2006-01-02 15:04"))
	if h.NotApplied > 0 {
		fmt.Fprintf(w, ", %d not made", h.NotApplied)
	}
	fmt.Fprintf(w, "\n  container: %s, %s\n", plural(s.Container, "line"), provenance.ContainerText)
	names := make([]string, 0, len(s.ByWho))
	for n := range s.ByWho {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return s.ByWho[names[i]] > s.ByWho[names[j]] || s.ByWho[names[i]] == s.ByWho[names[j]] && names[i] < names[j]
	})
	for _, n := range names {
		fmt.Fprintf(w, "  %s: %s\n", termtext.Line(n, 200), plural(s.ByWho[n], "line"))
	}
	if s.Unknown > 0 {
		fmt.Fprintf(w, "  unknown: %s (a record without line hashes: the buffer was over %d lines or %d bytes)\n", plural(s.Unknown, "line"), provenance.MaxSnapshotLines, provenance.MaxSnapshotBytes)
	}
	if n := countSameAs(lines); n > 0 {
		has := fmt.Sprintf("%d container lines have", n)
		if n == 1 {
			has = "1 container line has"
		}
		fmt.Fprintf(w, "  (* %s the same text as a line an agent or teacher wrote: moved or copied from it, or typed alike; --json names the change)\n", has)
	}
	if anyUnconfirmed(lines) {
		fmt.Fprintln(w, "  (? after a writer: Neovim did not answer that edit, which may or may not have been made; it is counted as made)")
	}
}

// printUnaccepted names the proposals whose text is in container lines.
func printUnaccepted(w io.Writer, un map[int]*proposals.Record) {
	if len(un) == 0 {
		return
	}
	seen := map[string]bool{}
	var names []string
	for _, p := range un {
		n := fmt.Sprintf("%s of %s (%s, in %s)", p.ID, termtext.Line(p.From, 60), p.State, termtext.Line(p.Instance, 80))
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\n! %d container line(s) have the text of a proposal that no host decision accepted: %s\n", len(un), strings.Join(names, "; "))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func countSameAs(lines []provenance.Line) int {
	n := 0
	for _, l := range lines {
		if l.SameAs != nil {
			n++
		}
	}
	return n
}

func anyUnconfirmed(lines []provenance.Line) bool {
	for _, l := range lines {
		if l.Change != nil && l.Change.Unconfirmed {
			return true
		}
	}
	return false
}
