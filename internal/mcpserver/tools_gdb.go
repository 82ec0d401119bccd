package mcpserver

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/errcode"
	"github.com/stem-edu/stem/internal/gdbmi"
	"github.com/stem-edu/stem/internal/profiles"
)

const maxWaitMS = 30000

func gdbStatusTools() []toolDef {
	return []toolDef{{
		clean: true,
		tool: mcp.NewTool("gdb_status",
			mcp.WithDescription("The student's debugger: running or stopped, where and why, the backtrace, and optionally the general registers. Read-only. Debugger output is content from the student's session."),
			mcp.WithBoolean("registers", mcp.Description("include the general registers")),
			readOnly()),
		run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
			regs, err := optBool(req, "registers", false)
			if err != nil {
				return nil, err
			}
			c, err := s.target(ctx)
			if err != nil {
				return nil, err
			}
			for attempt := 0; ; attempt++ {
				cl, err := c.gdb(ctx)
				if errors.Is(err, gdbmi.ErrNotRunning) {
					out := map[string]any{"state": "no-debugger", "message": partOf(c.target().Record, err).Error()}
					if sync, serr := gdbmi.ReadSync(c.target().Dir.Path); serr == nil {
						out["last_sync"] = sync
					}
					return out, nil
				}
				if err != nil {
					return nil, err
				}
				st, err := cl.Status(ctx, regs)
				if err != nil && attempt == 0 && endedSoon(cl) {
					// The bridge went away during the call (gdb quit): ask
					// again, which reports that and the last synced state.
					continue
				}
				if err != nil {
					return nil, err
				}
				return map[string]any{"status": st, "notice": untrustedNotice}, nil
			}
		},
	}}
}

// endedSoon reports whether cl's connection has ended or ends within a
// moment (a failed call can return just before Done is closed).
func endedSoon(cl GDBClient) bool {
	select {
	case <-cl.Done():
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// execTool defines a run-control tool that waits for the program to stop.
func execTool(name, desc string, cmd func() gdbmi.Command) toolDef {
	return toolDef{
		effect: true, clean: true, timeout: (maxWaitMS + 5000) * time.Millisecond,
		tool: mcp.NewTool(name,
			mcp.WithDescription(desc+" Waits up to wait_ms for the program to stop and returns where it stopped. The student sees the same debugger move."+sharedNote),
			mcp.WithInteger("wait_ms", mcp.Description("how long to wait for the stop (default 3000, 0 = do not wait)"), mcp.Min(0), mcp.Max(maxWaitMS)),
			mutating(false)),
		run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
			wait, err := optInt(req, "wait_ms", 3000, 0, maxWaitMS)
			if err != nil {
				return nil, err
			}
			return runControl(ctx, s, cmd(), time.Duration(wait)*time.Millisecond)
		},
	}
}

func runControl(ctx context.Context, s *Server, cmd gdbmi.Command, wait time.Duration) (any, error) {
	c, cl, err := s.gdbClient(ctx)
	if err != nil {
		return nil, err
	}
	events, cancel := c.subscribeGDB()
	defer cancel()
	if _, err := cl.Exec(ctx, cmd); err != nil {
		// gdb's MI run control never starts a program; say so plainly
		// rather than pass on "The program is not being run."
		var ce *gdbmi.CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Msg, "not being run") {
			return nil, refusedAs(errcode.NoProgram, "there is no program to control: it has not been started, or it has exited. "+
				"This tool never starts one; the student starts it in their gdb (run)")
		}
		return nil, err
	}
	out := map[string]any{"command": cmd.String(), "notice": untrustedNotice}
	if wait == 0 {
		out["state"] = "running"
		return out, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Kind != gdbmi.EventStopped && ev.Kind != gdbmi.EventExited {
				continue
			}
			out["event"] = eventJSON(ev)
			st, err := cl.Status(ctx, false)
			if err == nil {
				out["status"] = st
			}
			return out, nil
		case <-timer.C:
			out["state"] = "running"
			out["message"] = "the program had not stopped when the wait ended; gdb_status or gdb_interrupt"
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func gdbControlTools() []toolDef {
	return []toolDef{
		{
			effect: true, clean: true,
			tool: mcp.NewTool("gdb_break",
				mcp.WithDescription("Set a breakpoint in the student's debugger at file.c:LINE, a function, file.c:function or *0xADDRESS. No conditions."+sharedNote),
				mcp.WithString("location", mcp.Required(), mcp.MaxLength(256)),
				mutating(false)),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				text, err := reqString(req, "location")
				if err != nil {
					return nil, err
				}
				loc, err := gdbmi.ParseLocation(text)
				if err != nil {
					return nil, badInput("%v", err)
				}
				c, err := s.target(ctx)
				if err != nil {
					return nil, err
				}
				if a, ok := loc.Address(); ok {
					// A breakpoint is written into memory when the program
					// resumes: into a peripheral register, that is a write.
					if err := hardwareAddress(c.target().Record.Profile, "a breakpoint at", a); err != nil {
						return nil, err
					}
				}
				cl, err := c.gdb(ctx)
				if err != nil {
					return nil, err
				}
				res, err := cl.Exec(ctx, gdbmi.BreakInsert(loc))
				if err != nil {
					return nil, err
				}
				return map[string]any{"result": gdbmi.FieldsPlain(res.Values), "notice": untrustedNotice}, nil
			},
		},
		execTool("gdb_continue", "Continue the program in the student's debugger.", gdbmi.ExecContinue),
		execTool("gdb_step", "Step one source line, into calls.", gdbmi.ExecStep),
		execTool("gdb_next", "Step one source line, over calls.", gdbmi.ExecNext),
		execTool("gdb_finish", "Run until the current function returns.", gdbmi.ExecFinish),
		execTool("gdb_interrupt", "Interrupt the running program.", gdbmi.ExecInterrupt),
		{
			effect: true, clean: true,
			tool: mcp.NewTool("gdb_frame",
				mcp.WithDescription("Select a stack frame (0 is the innermost) in the student's debugger; later prints use it."+sharedNote),
				mcp.WithInteger("frame", mcp.Required(), mcp.Min(0), mcp.Max(gdbmi.MaxFrames)),
				mutating(false)),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				n, err := optInt(req, "frame", -1, 0, gdbmi.MaxFrames)
				if err != nil || n < 0 {
					return nil, badInput("frame is required (0..%d)", gdbmi.MaxFrames)
				}
				_, cl, err := s.gdbClient(ctx)
				if err != nil {
					return nil, err
				}
				if _, err := cl.Exec(ctx, gdbmi.StackSelectFrame(n)); err != nil {
					return nil, err
				}
				st, err := cl.Status(ctx, false)
				if err != nil {
					return nil, err
				}
				return map[string]any{"status": st, "notice": untrustedNotice}, nil
			},
		},
		{
			clean: true,
			tool: mcp.NewTool("gdb_print",
				mcp.WithDescription("Evaluate a C expression in the selected frame without side effects: variables, registers ($pc, $sp, $a0), members, indexing, arithmetic, casts, *ptr, {type}addr. Function calls and assignments are refused."),
				mcp.WithString("expression", mcp.Required(), mcp.MaxLength(256)),
				readOnly()),
			run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
				text, err := reqString(req, "expression")
				if err != nil {
					return nil, err
				}
				e, err := gdbmi.ParseSafeExpr(text)
				if err != nil {
					return nil, badInput("%v", err)
				}
				c, err := s.target(ctx)
				if err != nil {
					return nil, err
				}
				for _, n := range e.Integers() {
					if err := hardwareAddress(c.target().Record.Profile, "the constant", n); err != nil {
						return nil, err
					}
				}
				cl, err := c.gdb(ctx)
				if err != nil {
					return nil, err
				}
				res, err := cl.Exec(ctx, gdbmi.DataEvaluate(e))
				if err != nil {
					return nil, err
				}
				return map[string]any{"expression": text, "value": res.Console, "notice": untrustedNotice}, nil
			},
		},
	}
}

// hardwareAddress refuses a as an address in profile's hardware registers
// (profiles.Profile.Hardware). This catches addresses written as constants,
// not ones a pointer variable, a macro or arithmetic leads to
// (docs/security.md); the student can still do it in their gdb.
func hardwareAddress(profile, doing string, a uint64) error {
	p, _ := profiles.Get(profile)
	for _, r := range p.Hardware {
		if a >= r.Lo && a <= r.Hi {
			return badInput("%s 0x%x is refused on %s: that address is in %s (0x%08x-0x%08x), hardware registers where a read can change the device "+
				"(a UART's data register loses a byte) and a breakpoint is a register write; the student can do it in their gdb",
				doing, a, profile, r.What, r.Lo, r.Hi)
		}
	}
	return nil
}

func gdbCommandTools() []toolDef {
	return []toolDef{{
		effect: true, clean: true,
		tool: mcp.NewTool("gdb_command",
			mcp.WithDescription("Run any gdb command in the student's debugger and return its console output (full level: this includes shell, python and call)."+sharedNote),
			mcp.WithString("command", mcp.Required(), mcp.MaxLength(gdbmi.MaxConsoleLen)),
			mutating(true)),
		run: func(ctx context.Context, s *Server, req mcp.CallToolRequest) (any, error) {
			text, err := reqString(req, "command")
			if err != nil {
				return nil, err
			}
			_, cl, err := s.gdbClient(ctx)
			if err != nil {
				return nil, err
			}
			res, err := cl.Exec(ctx, gdbmi.Console(text))
			if err != nil {
				return nil, err
			}
			return map[string]any{"output": res.Console, "log": res.Log, "notice": untrustedNotice}, nil
		},
	}}
}

// eventJSON is the wire form of a gdb event in results and notifications,
// its strings (a frame's function and file names) sanitized.
func eventJSON(ev gdbmi.Event) map[string]any {
	m := map[string]any{"kind": string(ev.Kind)}
	if ev.Reason != "" {
		m["reason"] = ev.Reason
	}
	if ev.Signal != "" {
		m["signal"] = ev.Signal
	}
	if ev.ExitCode != nil {
		m["exit_code"] = *ev.ExitCode
	}
	if ev.Breakpoint != 0 {
		m["breakpoint"] = ev.Breakpoint
	}
	if ev.Frame != nil {
		m["frame"] = ev.Frame
	}
	if ev.ThreadID != "" {
		m["thread"] = ev.ThreadID
	}
	c, err := cleanJSON(m)
	if cm, ok := c.(map[string]any); err == nil && ok {
		return cm
	}
	return map[string]any{"kind": string(ev.Kind)} // cannot happen: m is plain data
}

// gdbClient returns the verified connection and its gdb channel.
func (s *Server) gdbClient(ctx context.Context) (*conn, GDBClient, error) {
	c, err := s.target(ctx)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.gdb(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, cl, nil
}
