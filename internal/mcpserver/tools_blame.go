package mcpserver

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/lib/beneath"
	"github.com/stem-edu/stem/internal/proposals"
	"github.com/stem-edu/stem/internal/provenance"
)

// file_blame is `stemctl audit blame` for MCP clients, the teacher's
// agent through the gate above all: who wrote which lines of a saved
// file, as ranges. It reads the file (never following a link below the
// card root) and stem's own records on the host; it returns no file
// text, which the client reads with nvim_buffer_read.

const (
	maxBlameBytes  = 16 << 20
	maxBlameRanges = 2000
)

func blameTools() []toolDef {
	return []toolDef{{
		clean: true, timeout: 20 * time.Second,
		tool: mcp.NewTool("file_blame",
			mcp.WithDescription("Who wrote each line of a file in the card as saved on disk: which agent or teacher (an edit made through stem, or a proposal the student accepted on their machine), or \"container\": written in the container (the student or their programs; also a shell command, a full-level agent's pane_run or Ex command), as ranges of lines with the change's time. A container line with the text of an agent's proposal that the student did not accept is marked unaccepted_proposal."),
			mcp.WithString("path", mcp.Required(), mcp.Description("file path, relative to the card repository (for example t1/main.c) or absolute inside it"), mcp.MaxLength(maxPathBytes)),
			readOnly()),
		run: runFileBlame,
	}}
}

func runFileBlame(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
	p, err := reqString(req, "path")
	if err != nil {
		return nil, err
	}
	c, err := s.target(ctx)
	if err != nil {
		return nil, err
	}
	card := c.target().Record.CardPath
	cp, err := resolveCardPath(card, p, true)
	if err != nil {
		return nil, asInput(err)
	}
	data, err := beneath.ReadFile(card, cp.Rel, maxBlameBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, badInput("%s does not exist in the card (blame reads the saved file)", cp.Rel)
	}
	if err != nil {
		return nil, err
	}
	h, err := provenance.Open(s.dirs.State).Read(card, cp.Rel)
	if err != nil {
		return nil, err
	}
	props, err := proposals.ForFile(s.dirs.State, card, cp.Rel)
	if err != nil {
		return nil, err
	}
	text := provenance.SplitFile(data)
	lines := provenance.Blame(h, text)
	out := map[string]any{
		"path": cp.Rel, "changes": len(h.Changes), "summary": provenance.Summarize(h, lines),
		"ranges": blameRanges(lines, proposals.Unaccepted(props, text, lines)),
	}
	if len(h.Problems) > 0 || h.Older {
		out["warning"] = "some of stem's records of this file could not be used (stemctl audit blame on the student's machine lists them); lines they wrote count as written in the container"
	}
	return out, nil
}

// blameRanges joins consecutive lines written by the same change (or in
// the container, matching the same unaccepted proposal or none) into one
// range.
func blameRanges(lines []provenance.Line, un map[int]*proposals.Record) []map[string]any {
	var out []map[string]any
	var last *provenance.Recorded
	for i, l := range lines {
		if i > 0 && l.By == lines[i-1].By && l.Change == last && un[i] == un[i-1] {
			out[len(out)-1]["to"] = l.N
			continue
		}
		if len(out) == maxBlameRanges {
			out = append(out, map[string]any{"from": l.N, "to": lines[len(lines)-1].N, "by": "not listed: more than 2000 ranges"})
			break
		}
		r := map[string]any{"from": l.N, "to": l.N, "by": l.By}
		if ch := l.Change; ch != nil {
			r["writer"], r["time"], r["tool"] = ch.Who.Label(), ch.Time, ch.Tool
			if ch.Proposal != "" {
				r["proposal"] = ch.Proposal
			}
			if ch.AcceptedBy != "" {
				r["accepted_by"] = ch.AcceptedBy
			}
		} else if l.By == provenance.ByContainer {
			r["writer"] = provenance.ContainerText
			if p := un[i]; p != nil {
				r["unaccepted_proposal"] = map[string]any{"proposal": p.ID, "from": p.From, "state": p.State,
					"note": "an agent proposed this text and no decision of the student's on the host accepted it"}
			}
		}
		out = append(out, r)
		last = l.Change
	}
	return out
}
