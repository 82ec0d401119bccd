package gdbmi

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/stem-edu/stem/internal/termtext"
)

// paneNote describes, for the student's pane, a stop that a client's
// command caused and that gdb itself does not print there: the normal end
// of a step, next, finish or until. Breakpoint hits and signals are
// printed by gdb in every console. who names the client that resumed the
// program ("agent", or the name a client gave itself, such as "editor");
// "" means the console did, and gets no note.
func paneNote(rec Record, who string) string {
	if who == "" {
		return ""
	}
	what := map[string]string{
		"end-stepping-range": "stepped",
		"function-finished":  "finished the function",
		"location-reached":   "ran to a location",
	}[rec.Str("reason")]
	fv, ok := rec.Get("frame")
	if what == "" || !ok {
		return ""
	}
	f := frameFrom(fv)
	var b strings.Builder
	fmt.Fprintf(&b, "\r\n[%s %s] %s () at %s:%d", who, what, f.Func, f.File, f.Line)
	if rv := rec.Str("return-value"); rv != "" {
		fmt.Fprintf(&b, ", returned %s", termtext.OneLine(rv, 80))
	}
	b.WriteString("\r\n")
	if src := sourceLine(f.Fullname, f.Line); src != "" {
		fmt.Fprintf(&b, "%d\t%s\r\n", f.Line, src)
	}
	return b.String()
}

// sourceLine returns line n of a source file, or "" if it cannot be read
// cheaply.
func sourceLine(path string, n int) string {
	if path == "" || n <= 0 {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 4<<20))
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return termtext.OneLine(sc.Text(), 200)
		}
	}
	return ""
}

// afterSelect keeps gdb-sync.json and the other clients informed when a
// client changes the selected frame or thread. gdb tells every UI except the
// one that asked, and all clients share that one MI UI, so the bridge asks
// gdb for the new frame and passes the news on as gdb would have.
func (b *bridge) afterSelect(op string, rec Record) {
	switch op {
	case "-thread-select":
		if f, ok := rec.Get("frame"); ok {
			b.frameSelected(rec.Str("new-thread-id"), f)
		}
	case "-stack-select-frame":
		b.goSubmit(pend{op: "-stack-info-frame", onResult: func(r Record) {
			if f, ok := r.Get("frame"); ok && r.Class == "done" {
				b.mu.Lock()
				id := b.state.ThreadID
				b.mu.Unlock()
				b.frameSelected(id, f)
			}
		}}, "-stack-info-frame")
	}
}

// frameSelected broadcasts a =thread-selected record and mirrors it.
func (b *bridge) frameSelected(threadID string, frame Value) {
	rec := Record{Kind: KindNotify, Class: "thread-selected", Results: []Field{
		{Name: "id", Value: Value{Kind: ValueConst, Const: threadID}},
		{Name: "frame", Value: frame},
	}}
	b.broadcast(Format(rec))
	b.updateSync(rec)
}

// stemClientOp is the bridge's one command of its own: "-stem-client NAME"
// names the connection, so the pane's notes say who moved the program
// ("[editor stepped] ...") instead of "agent". It never reaches gdb.
const stemClientOp = "-stem-client"

// nameClient handles -stem-client and returns the result record (without
// token).
func (b *bridge) nameClient(c *bclient, name string) string {
	ok := name != "" && len(name) <= 16
	for i := 0; ok && i < len(name); i++ {
		ch := name[i]
		ok = ch >= 'a' && ch <= 'z' || i > 0 && (ch == '-' || ch >= '0' && ch <= '9')
	}
	if !ok {
		return "^error,msg=" + Quote("bridge: a client name is 1 to 16 of a-z, 0-9 and '-', starting with a letter")
	}
	b.mu.Lock()
	c.name = name
	b.mu.Unlock()
	return "^done"
}

// broadcastExcept sends line to every client but skip (nil: to all).
func (b *bridge) broadcastExcept(skip *bclient, line string) {
	for _, c := range b.clientList() {
		if c != skip {
			c.send(line)
		}
	}
}

// afterBreak tells the other clients about a breakpoint a client changed
// through MI. gdb announces breakpoint changes (=breakpoint-created,
// -modified, -deleted) to every UI except during the -break-* command that
// made them, and all clients share one MI UI, so without this an editor
// showing breakpoints would never see the one an agent set. As for a
// console command, the client that asked gets its result only.
//
// A -break-delete without numbers (delete all) is not passed on: the bridge
// does not know which breakpoints existed.
func (b *bridge) afterBreak(p pend, rec Record) {
	switch p.op {
	case "-break-insert", "-dprintf-insert":
		if v, ok := rec.Get("bkpt"); ok {
			b.notifyOthers(p.c, Record{Kind: KindNotify, Class: "breakpoint-created", Results: []Field{{Name: "bkpt", Value: v}}})
		}
	case "-break-watch":
		for _, name := range []string{"wpt", "hw-rwpt", "hw-awpt"} {
			if v, ok := rec.Get(name); ok {
				b.breakInfo(p.c, v.Str("number"), "breakpoint-created")
			}
		}
	case "-break-delete":
		for _, n := range breakNumbers(p.args, false) {
			b.notifyOthers(p.c, Record{Kind: KindNotify, Class: "breakpoint-deleted", Results: []Field{
				{Name: "id", Value: Value{Kind: ValueConst, Const: n}}}})
		}
	case "-break-enable", "-break-disable":
		for _, n := range breakNumbers(p.args, false) {
			b.breakInfo(p.c, n, "breakpoint-modified")
		}
	case "-break-condition", "-break-after", "-break-commands", "-break-passcount":
		for _, n := range breakNumbers(p.args, true) {
			b.breakInfo(p.c, n, "breakpoint-modified")
		}
	}
}

func (b *bridge) notifyOthers(skip *bclient, rec Record) {
	b.broadcastExcept(skip, Format(rec))
}

// breakInfo asks gdb for breakpoint n and announces it to every client but
// skip as a class record (breakpoint-created or breakpoint-modified).
func (b *bridge) breakInfo(skip *bclient, n, class string) {
	if n == "" {
		return
	}
	b.goSubmit(pend{op: "-break-info", onResult: func(r Record) {
		if r.Class != "done" {
			return
		}
		tbl, _ := r.Get("BreakpointTable")
		body, _ := tbl.Get("body")
		for _, bk := range body.Elems() {
			if bk.Str("number") == n {
				b.notifyOthers(skip, Record{Kind: KindNotify, Class: class, Results: []Field{{Name: "bkpt", Value: bk}}})
				return
			}
		}
	}}, "-break-info "+n)
}

// maxBreakRange bounds the numbers one range ("1-5") of a -break-delete or
// -break-enable argument expands to.
const maxBreakRange = 256

// breakNumbers reads the breakpoint numbers in a -break-* command's
// arguments: plain numbers, location numbers ("2.1" is breakpoint 2) and
// ranges ("1-3"); options ("--force") are skipped. With first, only the
// first number counts (the others are a condition, a count or commands).
func breakNumbers(args string, first bool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		n = strings.TrimLeft(n, "0")
		if n == "" || seen[n] {
			return
		}
		seen[n] = true
		out = append(out, n)
	}
	for _, a := range strings.Fields(args) {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if lo, hi, ok := strings.Cut(a, "-"); ok {
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || l < 0 || h < l || h-l >= maxBreakRange {
				if first {
					return out
				}
				continue
			}
			for i := l; i <= h; i++ {
				add(strconv.Itoa(i))
			}
		} else if n, _, _ := strings.Cut(a, "."); isDigits(n) {
			add(n)
		} else if first {
			return out
		}
		if first && len(out) > 0 {
			return out
		}
	}
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
