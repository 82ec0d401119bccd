package debug_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv/demotask"
)

// The student's editor follows the debug layout's gdb on hazard3-sim
// (gdb-multiarch and QEMU, an assembly file): the task's files open; a step
// typed in the gdb pane moves the sign; an agent's gdb_break shows as a
// sign; a breakpoint toggled in the editor stops the program; a stop never
// interrupts typing in Insert mode, and an unsaved buffer is never
// replaced, neither by a stop nor by opening the task's files again.
func TestEditorFollowsGDBOnHazard3(t *testing.T) {
	s := newSession(t, "hazard3-sim", "inf", "bss", "4")
	s.stemctl("build", s.inst)
	s.debug("--no-build")
	if len(s.lay.Files) != 2 || filepath.Base(s.lay.Files[0]) != "main.c" || filepath.Base(s.lay.Files[1]) != "counter.S" {
		t.Fatalf("debug opened %q, want the manifest's open list", s.lay.Files)
	}

	// The task's files are open, the first shown; QEMU is halted at its
	// reset vector, where there is no source, and the status line says so.
	s.waitView("main.c shown, counter.S listed, the halted program without source", func(v editorView) bool {
		return v.Cur == "main.c" && strings.Contains(" "+v.Listed+" ", " counter.S ") &&
			v.Connected && v.State == "stopped" && strings.Contains(v.Status, "no source")
	})
	s.waitPane(s.lay.EditorPane, "(no source)")

	// The student looks at the assembly; an agent sets a breakpoint there.
	s.ex("buffer counter.S")
	s.waitView("counter.S shown", func(v editorView) bool { return v.Cur == "counter.S" })
	s.stemctl("mcp", "select", s.inst)
	s.stemctl("mcp", "call", "--level", "assist", "gdb_break", "location=asm_count")
	s.waitView("the agent's breakpoint as a sign", func(v editorView) bool { return hasSigns(v, "counter.S:StemBreak@35") })

	// The student continues and steps in the gdb pane: the sign follows.
	s.gdb("continue")
	s.waitView("the stop at the breakpoint", func(v editorView) bool { return hasSigns(v, "counter.S:StemPCBreak@35") })
	s.gdb("step")
	s.waitView("the step to line 36", func(v editorView) bool {
		return hasSigns(v, "counter.S:StemBreak@35", "counter.S:StemPC@36") && !strings.Contains(v.Signs, "@35 counter.S:StemPCBreak")
	})

	// A breakpoint toggled in the editor stops the program there, in the
	// gdb pane and for agents too.
	s.ex("48")
	s.ex("StemBreak")
	s.waitView("the editor's breakpoint", func(v editorView) bool { return hasSigns(v, "counter.S:StemBreak@48") })
	s.ex("StemContinue")
	s.waitView("the stop at the editor's breakpoint", func(v editorView) bool { return hasSigns(v, "counter.S:StemPCBreak@48") })
	s.waitPane(s.lay.GDBPane, "at counter.S:48")
	if out := s.stemctl("mcp", "call", "--level", "observe", "gdb_status"); !strings.Contains(out, `"line": 48`) {
		t.Fatalf("gdb_status after the editor's breakpoint:\n%s", out)
	}
	// Toggled off again: gone from gdb as well.
	s.ex("StemBreak")
	s.waitView("the breakpoint removed", func(v editorView) bool {
		return hasSigns(v, "counter.S:StemPC@48") && !strings.Contains(v.Signs, "StemBreak@48")
	})
	s.gdb("info breakpoints")
	text := s.waitPane(s.lay.GDBPane, "in asm_count at counter.S:35")
	if table := text[strings.LastIndex(text, "info breakpoints"):]; strings.Contains(table, "at counter.S:48") {
		t.Fatalf("gdb still has the breakpoint the editor removed:\n%s", table)
	}

	// Registers and memory: the view opens beside the editor and marks
	// what each instruction changed (addi t3; then sw t3 to asm_calls).
	s.ex("StemRegisters")
	s.waitPane(s.lay.EditorPane, "registers (* changed)")
	s.waitPane(s.lay.EditorPane, "$sp = 0x")
	s.ex("StemMemory &asm_calls")
	s.waitPane(s.lay.EditorPane, "&asm_calls = 0x")
	s.ex("StemStepi")
	s.waitPane(s.lay.EditorPane, "*t3 ")
	s.ex("StemStepi")
	s.waitPane(s.lay.EditorPane, "*+0 ")
	s.ex("StemRegisters")

	// Typing in Insert mode goes on through a stop; the jump to the stop
	// waits until the student is idle, and then leaves the unsaved buffer
	// where it is, opening the frame's file in a split.
	s.ex("set updatetime=300")
	s.ex("edit notes.txt")
	s.keys(s.lay.EditorPane, "ifirst ")
	before := s.waitView("typing in notes.txt", func(v editorView) bool { return v.Mode == "i" && v.CurLine1 == "first " })
	s.gdb("continue")
	during := s.waitView("the next stop", func(v editorView) bool { return v.Stops > before.Stops && v.State == "stopped" })
	if during.Mode != "i" || during.Cur != "notes.txt" || !during.Pending || !hasSigns(during, "counter.S:StemPCBreak@35") {
		t.Fatalf("a stop while typing: %+v", during)
	}
	s.keys(s.lay.EditorPane, "second")
	s.waitView("the rest of the typing", func(v editorView) bool { return v.Mode == "i" && v.CurLine1 == "first second" })
	s.keys(s.lay.EditorPane, "", "Escape")
	after := s.waitView("the deferred jump, in a split", func(v editorView) bool { return !v.Pending && v.Wins == 2 })
	if after.Cur != "notes.txt" || !after.CurMod || after.CurLine1 != "first second" || !hasSigns(after, "counter.S:StemPCBreak@35") {
		t.Fatalf("after the deferred jump: %+v", after)
	}

	// debug again: a new gdb, the editor reconnects; the unsaved buffer
	// stays current and intact while the task's files are opened again.
	s.debug("--no-build")
	v := s.waitView("the new gdb", func(v editorView) bool {
		return v.Connected && v.State == "stopped" && strings.Contains(v.Status, "no source") && !strings.Contains(v.Signs, "StemBreak")
	})
	if v.Cur != "notes.txt" || !v.CurMod || v.CurLine1 != "first second" || !strings.Contains(v.Listed, "main.c") {
		t.Fatalf("after debug again: %+v", v)
	}
	s.noInternalErrors()
	if p := os.Getenv("STEM_DEBUG_SCREENSHOT"); p != "" {
		s.stemctl("exec", s.inst, "--", "tmux", "-S", filepath.Join(s.dir, "t.sock"), "resize-window", "-t", "stem:edit", "-x", "190", "-y", "44")
		s.ex("only")
		s.ex("buffer counter.S")
		s.gdb("break asm_count")
		s.waitPane(s.lay.GDBPane, "Breakpoint 1 at")
		s.gdb("continue")
		s.waitView("the screenshot's stop", func(v editorView) bool { return hasSigns(v, "counter.S:StemPCBreak@35") && v.Cur == "counter.S" })
		s.ex("StemRegisters")
		s.waitPane(s.lay.EditorPane, "registers (* changed)")
		s.gdb("step")
		s.waitView("the screenshot's step", func(v editorView) bool { return hasSigns(v, "counter.S:StemPC@36") })
		s.waitPane(s.lay.EditorPane, "*pc ")
		s.keys(s.lay.EditorPane, "", "Escape")
		s.waitPane(s.lay.EditorPane, "*t0 ")
		text, image := s.screenshot()
		if err := os.WriteFile(p+".txt", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".svg", []byte(image), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// On native-amd64 the program pane stays the program's terminal; the demo
// task's layout debugs its failing unit tests, and a frame in a file the
// editor does not show (the caller, the test) opens it.
func TestEditorFollowsGDBNative(t *testing.T) {
	s := newSession(t, "native-amd64", "demo", "hello", "1")
	// up alone opens the task's files (here its editable ones).
	s.waitView("words.c shown after up", func(v editorView) bool {
		return v.Cur == "words.c" && strings.Contains(v.Listed, "test_words.c") && !v.Connected
	})
	// The student is in a window of their own when they ask for the
	// layout; the control shows their client really was there.
	s.stemctl("exec", s.inst, "--", "tmux", "-S", filepath.Join(s.dir, "t.sock"), "new-window", "-t", "stem:", "-n", "notes")
	if w, _ := s.shown(); w != "notes" {
		t.Fatalf("control: the session shows window %q, want the student's notes", w)
	}
	s.debug()
	// Their client is taken to the layout with the keys in the editor, not
	// in gdb.
	if w, p := s.shown(); w != "edit" || p != s.lay.EditorPane || p == s.lay.GDBPane {
		t.Fatalf("after debug the session shows window %q pane %s, want edit and the editor %s (gdb is %s)", w, p, s.lay.EditorPane, s.lay.GDBPane)
	}
	s.waitView("words.c shown, the program not started", func(v editorView) bool {
		return v.Cur == "words.c" && strings.Contains(v.Listed, "test_words.c") && v.Connected && v.State == "not-started"
	})
	s.gdb("break count_words")
	s.waitView("the breakpoint", func(v editorView) bool { return hasSigns(v, "words.c:StemBreak@15") })
	// Only the failing check with the tab stops.
	s.gdb(`condition 1 s[0] == 't' && s[1] == 'a'`)
	s.gdb("run")
	s.waitView("the stop in count_words", func(v editorView) bool { return hasSigns(v, "words.c:StemPCBreak@15") })
	s.waitPane(s.lay.GDBPane, `count_words (s=0x`)
	// F10 in the editor is next.
	s.keys(s.lay.EditorPane, "", "F10")
	s.waitView("next by F10", func(v editorView) bool { return hasSigns(v, "words.c:StemBreak@15", "words.c:StemPC@16") })
	s.gdb("up")
	s.waitView("the caller's frame in test_words.c", func(v editorView) bool {
		return v.Cur == "test_words.c" && hasSigns(v, "test_words.c:StemPC@24", "words.c:StemBreak@15")
	})
	// Run to the cursor, past the failing check's report: its output on
	// the program's own terminal.
	s.ex("29")
	s.ex("StemUntil")
	s.waitView("the stop at the cursor's line", func(v editorView) bool { return hasSigns(v, "test_words.c:StemPC@29") })
	s.waitPane(s.lay.ProgramPane, demotask.FailingCheck)
	s.ex("StemContinue")
	s.waitView("the program's exit", func(v editorView) bool {
		return v.State == "exited" && !strings.Contains(v.Signs, "StemPC")
	})
	s.waitPane(s.lay.ProgramPane, demotask.Failed)
	s.noInternalErrors()
}

// On rp2350 without a board (no probe passed with --device, so no gdb
// server): the layout still opens the task's file, gdb-multiarch has the
// ELF of the instance's target, and a breakpoint set in the gdb pane shows
// as a sign in the editor, for the Hazard3 and the Cortex-M33 target. What
// needs the board (stops, steps) is not tested here.
func TestEditorOnRP2350WithoutABoard(t *testing.T) {
	for _, target := range []string{"rp2350-rv", "rp2350-arm"} {
		t.Run(target, func(t *testing.T) {
			s := newSession(t, "rp2350", "demo", "hello", "3", "--target", target)
			s.stemctl("build", s.inst)
			s.debug("--no-build")
			s.waitView("main.c shown, the editor connected to the bridge", func(v editorView) bool {
				return v.Cur == "main.c" && v.Connected
			})
			s.waitPane(s.lay.ProgramPane, "Name the probe's USB device")
			s.gdb("break main")
			// Optimised code: gdb names the line (main's first, inlined from
			// led_init), and the sign must be there.
			text := s.waitPane(s.lay.GDBPane, "Breakpoint 1 at")
			m := regexp.MustCompile(`Breakpoint 1 at 0x[0-9a-f]+: file main\.c, line (\d+)\.`).FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("gdb's breakpoint line:\n%s", text)
			}
			s.waitView("the breakpoint at main as a sign", func(v editorView) bool { return hasSigns(v, "main.c:StemBreak@"+m[1]) })
			s.gdb("info files")
			s.waitPane(s.lay.GDBPane, "build/"+target+"/hello.elf")
			s.noInternalErrors()
		})
	}
}
