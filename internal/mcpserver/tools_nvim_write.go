package mcpserver

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/agentpolicy"
	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/nvim"
)

const (
	maxEditLines = 2000
	maxEditBytes = 256 * 1024
	maxHintBytes = nvim.MaxHintBytes
	maxExBytes   = 64 * 1024
)

func nvimEditTools() []toolDef {
	return []toolDef{
		{
			effect: true,
			tool: mcp.NewTool("nvim_open",
				mcp.WithDescription("Load a file of the card repository as a buffer of the student's Neovim (through the API, never an Ex command), so nvim_buffer_read, nvim_buffer_edit and nvim_hint can use it. The student's windows are left alone: what they see and type in stays; the file is listed in their :ls."+sharedNote),
				mcp.WithString("path", mcp.Required(), mcp.Description("file path relative to the card repository (or absolute inside it)"), mcp.MaxLength(maxPathBytes)),
				mutating(false)),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				p, err := reqString(req, "path")
				if err != nil {
					return nil, err
				}
				c, err := s.target(ctx)
				if err != nil {
					return nil, err
				}
				cp, err := resolveCardPath(c.target().Record.CardPath, p, false)
				if err != nil {
					return nil, asInput(err)
				}
				o, err := c.nvim.Open(ctx, cp.Abs)
				if err != nil {
					return nil, err
				}
				return map[string]any{"opened": o, "path": cp.Rel}, nil
			},
		},
		{
			effect: true,
			tool: mcp.NewTool("nvim_buffer_edit",
				mcp.WithDescription("Replace lines start..end of a file open in the student's Neovim with new lines (the buffer changes; the student decides when to save). Only files the task lists as editable, or files the student marked on the host (`stemctl allow INSTANCE --edit FILE`). Give expected_tick (from nvim_buffer_read) to refuse the edit if the buffer changed since you read it. When the task's agent policy is edits = \"propose\", the buffer is left alone: the student is shown the change as a proposal to accept or reject, and the result has its id for proposal_status."+sharedNote),
				mcp.WithString("path", mcp.Required(), mcp.Description("file path relative to the card repository; it must be open in Neovim (nvim_open)"), mcp.MaxLength(maxPathBytes)),
				mcp.WithInteger("start", mcp.Required(), mcp.Description("first line to replace, 1-based"), mcp.Min(1), mcp.Max(10000000)),
				mcp.WithInteger("end", mcp.Required(), mcp.Description("last line to replace, inclusive; start-1 inserts before start"), mcp.Min(0), mcp.Max(10000000)),
				mcp.WithArray("lines", mcp.Required(), mcp.Description("replacement lines, one string per line (empty array deletes)"), mcp.WithStringItems(mcp.MaxLength(maxEditBytes)), mcp.MaxItems(maxEditLines)),
				mcp.WithInteger("expected_tick", mcp.Description("the buffer's tick from nvim_buffer_read; the edit is refused if it changed"), mcp.Min(0)),
				mutating(true)),
			run: runBufferEdit,
		},
		{
			effect: true,
			tool: mcp.NewTool("nvim_hint",
				mcp.WithDescription("Show a short note at a line of a file open in the student's Neovim, as virtual text. The file is not changed. clear=true removes stem's notes from that buffer."+sharedNote),
				mcp.WithString("path", mcp.Required(), mcp.Description("file path relative to the card repository; it must be open in Neovim"), mcp.MaxLength(maxPathBytes)),
				mcp.WithInteger("line", mcp.Description("1-based line for the note"), mcp.Min(1), mcp.Max(10000000)),
				mcp.WithString("text", mcp.Description("the note (one line)"), mcp.MaxLength(maxHintBytes)),
				mcp.WithBoolean("clear", mcp.Description("remove stem's notes from the buffer instead")),
				mutating(false)),
			run: runHint,
		},
	}
}

// loadedBuffer resolves a card path to the buffer holding it.
func (s *Server) loadedBuffer(ctx context.Context, c *conn, p string) (cardPath, *nvim.BufferText, error) {
	cp, err := resolveCardPath(c.target().Record.CardPath, p, true)
	if err != nil {
		return cp, nil, asInput(err)
	}
	bt, err := c.nvim.ReadBuffer(ctx, nvim.File(cp.Abs), 1, 1, 1)
	if errors.Is(err, nvim.ErrNotLoaded) {
		return cp, nil, badInput("%s is not open in Neovim: open it first with nvim_open", cp.Rel)
	}
	if err != nil {
		return cp, nil, err
	}
	// Neovim may have found the buffer through a symlink made in the
	// container since the path was checked.
	if rawName(bt.Name) != cp.Abs {
		if err := s.checkBufferInCard(c, bt.Buffer, bt.Name); err != nil {
			return cp, nil, err
		}
	}
	return cp, bt, nil
}

func runBufferEdit(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
	p, err := reqString(req, "path")
	if err != nil {
		return nil, err
	}
	start, err := optInt(req, "start", 0, 1, 10000000)
	if err != nil {
		return nil, err
	}
	end, err := optInt(req, "end", -1, 0, 10000000)
	if err != nil {
		return nil, err
	}
	if end < start-1 {
		return nil, badInput("end (%d) must be at least start-1 (%d)", end, start-1)
	}
	lines, ok, err := optStrings(req, "lines", maxEditLines, maxEditBytes)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badInput("lines is required")
	}
	tick, err := optInt(req, "expected_tick", -1, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	c, err := s.target(ctx)
	if err != nil {
		return nil, err
	}
	cp, bt, err := s.loadedBuffer(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if err := s.editAllowed(ctx, c, cp, bt.Buffer); err != nil {
		return nil, err
	}
	if tick >= 0 && bt.Tick != tick {
		return nil, refusedAs(errcode.Stale, "the buffer changed since you read it (tick %d, now %d): read it again", tick, bt.Tick)
	}
	if end > bt.Total || start > bt.Total+1 {
		return nil, badInput("lines %d..%d are outside the buffer (%d lines)", start, end, bt.Total)
	}
	if s.policyFor(c).Edits == agentpolicy.EditsPropose {
		return s.propose(ctx, c, cp, bt.Buffer, start, end, lines)
	}
	ed, err := s.recordedEdit(ctx, c, cp, bt.Buffer, tick, start, end, lines)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": cp.Rel, "buffer": bt.Buffer, "edited": ed, "saved": false}, nil
}

// editAllowed applies the assist rule: the task's editable globs (those
// recorded on the host, narrowed by the card's current ones), or a file
// the student marked on the host; never git internals or stem state.
func (s *Server) editAllowed(ctx context.Context, c *conn, cp cardPath, buf int) error {
	if protected(cp.Rel) {
		return refusedAs(errcode.NotEditable, "%s is inside %s, which is never editable through MCP", cp.Rel, "a protected directory (.git, .stem, .rv)")
	}
	// The level the task's policy leaves (a full server capped at assist
	// edits, or proposes, like an assist one).
	if s.levelFor(c) >= Full {
		return nil
	}
	// The host's record, not b:stem_allow_edit nor stem.toml alone: a
	// buffer variable is set by whatever runs in the container's Neovim,
	// and the card can be rewritten from inside the container.
	e, err := s.consents(ctx, c)
	if err != nil {
		return err
	}
	if e.Editable(cp.Rel) {
		return nil
	}
	var card []string
	tc, cerr := s.taskContext(c)
	if cerr == nil {
		card, _ = tc["editable"].([]string)
	}
	inFloor := matchEditable(e.FloorEditable(), cp.Rel)
	// A card that cannot be read leaves the recorded globs; one that can
	// may only narrow them.
	if inFloor && (cerr != nil || matchEditable(card, cp.Rel)) {
		return nil
	}
	inst := c.target().Record.Instance
	if !inFloor && matchEditable(card, cp.Rel) {
		return refusedAs(errcode.NotEditable, "%s is not editable at the assist level: the card's stem.toml lists it now, but the globs recorded on the host when the instance was made do not (the card can be rewritten from inside the container); the student takes the card's on the host (`stemctl policy %s --loosen`) or marks the file (`stemctl allow %s --edit %s`)", cp.Rel, inst, inst, cp.Rel)
	}
	return refusedAs(errcode.NotEditable, "%s is not editable at the assist level: the task's manifest does not list it as editable and the student has not marked it on the host (`stemctl allow %s --edit %s`)", cp.Rel, inst, cp.Rel)
}

func runHint(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
	p, err := reqString(req, "path")
	if err != nil {
		return nil, err
	}
	clear, err := optBool(req, "clear", false)
	if err != nil {
		return nil, err
	}
	c, err := s.target(ctx)
	if err != nil {
		return nil, err
	}
	cp, bt, err := s.loadedBuffer(ctx, c, p)
	if err != nil {
		return nil, err
	}
	if clear {
		n, err := c.nvim.ClearHints(ctx, bt.Buffer)
		return map[string]any{"path": cp.Rel, "cleared": n}, err
	}
	line, err := optInt(req, "line", 0, 1, 10000000)
	if err != nil || line == 0 {
		return nil, badInput("line is required (1-based)")
	}
	text, err := reqString(req, "text")
	if err != nil {
		return nil, err
	}
	if line > bt.Total {
		return nil, badInput("line %d is past the end of %s (%d lines)", line, cp.Rel, bt.Total)
	}
	id, err := c.nvim.Hint(ctx, bt.Buffer, line, s.author(), text)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": cp.Rel, "line": line, "hint_id": id}, nil
}

func nvimFreeTextTools() []toolDef {
	return []toolDef{
		{
			effect: true,
			tool: mcp.NewTool("nvim_command",
				mcp.WithDescription("Run Ex commands in the student's Neovim and return their output (full level: this can run anything the student could)."+sharedNote),
				mcp.WithString("command", mcp.Required(), mcp.MaxLength(maxExBytes)),
				mutating(true)),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				cmd, err := reqString(req, "command")
				if err != nil {
					return nil, err
				}
				c, err := s.target(ctx)
				if err != nil {
					return nil, err
				}
				out, err := c.nvim.Command(ctx, cmd)
				if err != nil {
					return nil, err
				}
				return map[string]any{"output": out, "notice": untrustedNotice}, nil
			},
		},
		{
			effect: true,
			tool: mcp.NewTool("nvim_lua",
				mcp.WithDescription("Run Lua in the student's Neovim (the chunk receives args as ...) and return its result (full level)."+sharedNote),
				mcp.WithString("code", mcp.Required(), mcp.MaxLength(maxExBytes)),
				mcp.WithArray("args", mcp.Description("values passed to the chunk"), mcp.MaxItems(64)),
				mutating(true)),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				code, err := reqString(req, "code")
				if err != nil {
					return nil, err
				}
				var luaArgs []any
				if v, ok := args(req)["args"].([]any); ok {
					luaArgs = v
				}
				c, err := s.target(ctx)
				if err != nil {
					return nil, err
				}
				out, err := c.nvim.Lua(ctx, code, luaArgs)
				if err != nil {
					return nil, err
				}
				return map[string]any{"result": out, "notice": untrustedNotice}, nil
			},
		},
	}
}
