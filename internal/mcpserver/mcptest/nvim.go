package mcptest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/stem-edu/stem/internal/nvim"
)

// Nvim is a fake of the student's Neovim: numbered buffers with lines and
// a change tick, hints, and a record of the Ex and Lua sent. Down, when
// set, is what every call fails with (a Neovim that is gone or refused).
type Nvim struct {
	mu      sync.Mutex
	bufs    map[int]*Buffer
	order   []int
	cur     int
	down    error
	hints   map[int][]string
	cmds    []string
	lua     []string
	props   map[string]string // id → token
	nextBuf int
	// Diags are the diagnostics per buffer number.
	Diags map[int]*nvim.Diagnostics
}

// Buffer is one of the fake's buffers.
type Buffer struct {
	Name     string
	Lines    []string
	Modified bool
	Tick     int
}

// NewNvim returns an editor with no buffers.
func NewNvim() *Nvim {
	return &Nvim{bufs: map[int]*Buffer{}, hints: map[int][]string{}, props: map[string]string{}, nextBuf: 1, Diags: map[int]*nvim.Diagnostics{}}
}

// AddBuffer loads a buffer named name (an absolute path, or "" for an
// unnamed one) and makes it current; it returns its number.
func (n *Nvim) AddBuffer(name string, lines ...string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addLocked(name, lines)
}

func (n *Nvim) addLocked(name string, lines []string) int {
	b := n.nextBuf
	n.nextBuf++
	n.bufs[b] = &Buffer{Name: name, Lines: append([]string(nil), lines...), Tick: 1}
	n.order = append(n.order, b)
	n.cur = b
	return b
}

// Buffer returns a copy of buffer b (nil if there is none).
func (n *Nvim) Buffer(b int) *Buffer {
	n.mu.Lock()
	defer n.mu.Unlock()
	bf := n.bufs[b]
	if bf == nil {
		return nil
	}
	c := *bf
	c.Lines = append([]string(nil), bf.Lines...)
	return &c
}

// SetDown makes every call fail with err (nil: the editor answers again).
func (n *Nvim) SetDown(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = err
}

// Hints returns the hints shown in buffer b, each as "LINE:WHO:TEXT".
func (n *Nvim) Hints(b int) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.hints[b]...)
}

// Commands returns the Ex commands and Lua chunks sent, oldest first.
func (n *Nvim) Commands() (ex, lua []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.cmds...), append([]string(nil), n.lua...)
}

// ready is the fake's state of connection; n.mu is held.
func (n *Nvim) ready() error {
	if n.down != nil {
		return n.down
	}
	return nil
}

func (n *Nvim) Connect(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready()
}

func (n *Nvim) Close() error { return nil }

func (n *Nvim) Status(context.Context) (*nvim.Status, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	st := &nvim.Status{Mode: "n", Buffer: n.cur, Window: 1000, Line: 1, Col: 1, Buffers: []nvim.BufferInfo{}}
	for _, b := range n.order {
		bf := n.bufs[b]
		st.Buffers = append(st.Buffers, nvim.BufferInfo{Number: b, Name: nvim.Text{S: bf.Name}, Loaded: true, Listed: true,
			Modified: bf.Modified, Lines: len(bf.Lines)})
		if b == n.cur {
			st.File = nvim.Text{S: bf.Name}
		}
	}
	return st, nil
}

func (n *Nvim) Diagnostics(_ context.Context, buf int) (*nvim.Diagnostics, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	if d := n.Diags[buf]; d != nil {
		c := *d
		c.Items = append([]nvim.Diagnostic(nil), d.Items...)
		return &c, nil
	}
	return &nvim.Diagnostics{Items: []nvim.Diagnostic{}}, nil
}

// find resolves ref as Neovim does; n.mu is held.
func (n *Nvim) find(ref nvim.BufferRef) (int, *Buffer, error) {
	if ref.Path != "" {
		for _, b := range n.order {
			if n.bufs[b].Name == ref.Path {
				return b, n.bufs[b], nil
			}
		}
		return 0, nil, fmt.Errorf("%s: %w", ref, nvim.ErrNotLoaded)
	}
	b := ref.Number
	if b == 0 {
		b = n.cur
	}
	if bf := n.bufs[b]; bf != nil {
		return b, bf, nil
	}
	return 0, nil, fmt.Errorf("%s: %w", ref, nvim.ErrNoBuffer)
}

// ReadBuffer returns lines start..end (1-based; end 0: the last), whole
// lines within maxBytes as the real client reads them.
func (n *Nvim) ReadBuffer(_ context.Context, ref nvim.BufferRef, start, end, maxBytes int) (*nvim.BufferText, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	b, bf, err := n.find(ref)
	if err != nil {
		return nil, fmt.Errorf("nvim read: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = nvim.DefaultMaxBytes
	}
	total := len(bf.Lines)
	if end <= 0 || end > total {
		end = total
	}
	bt := &nvim.BufferText{Buffer: b, Name: nvim.Text{S: bf.Name}, Total: total, First: start, Modified: bf.Modified, Tick: bf.Tick}
	var got []string
	size := 0
	for i := start; i <= end; i++ {
		l := bf.Lines[i-1]
		if size+len(l)+1 > maxBytes {
			bt.Truncated = true
			break
		}
		size += len(l) + 1
		got = append(got, l)
	}
	bt.Count = len(got)
	bt.SetText(strings.Join(got, "\n"))
	return bt, nil
}

// Open loads absPath from disk into a buffer (or finds it loaded) and
// makes it current.
func (n *Nvim) Open(_ context.Context, absPath string) (*nvim.Opened, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	if b, bf, err := n.find(nvim.File(absPath)); err == nil {
		n.cur = b
		return &nvim.Opened{Buffer: b, Name: nvim.Text{S: bf.Name}, Lines: len(bf.Lines)}, nil
	}
	data, err := os.ReadFile(absPath)
	isNew := os.IsNotExist(err)
	if err != nil && !isNew {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	b := n.addLocked(absPath, lines)
	return &nvim.Opened{Buffer: b, Name: nvim.Text{S: absPath}, Lines: len(lines), New: isNew}, nil
}

func (n *Nvim) Hint(_ context.Context, buf, line int, who, text string) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return 0, err
	}
	if n.bufs[buf] == nil {
		return 0, nvim.ErrNoBuffer
	}
	n.hints[buf] = append(n.hints[buf], fmt.Sprintf("%d:%s:%s", line, who, text))
	return len(n.hints[buf]), nil
}

func (n *Nvim) ClearHints(_ context.Context, buf int) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return 0, err
	}
	k := len(n.hints[buf])
	delete(n.hints, buf)
	return k, nil
}

func (n *Nvim) Command(_ context.Context, src string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return "", err
	}
	n.cmds = append(n.cmds, src)
	return "", nil
}

func (n *Nvim) Lua(_ context.Context, code string, _ []any) (any, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	n.lua = append(n.lua, code)
	return nil, nil
}

func (n *Nvim) Snapshot(_ context.Context, buf, maxBytes int) (*nvim.Snapshot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	bf := n.bufs[buf]
	if bf == nil {
		return nil, nvim.ErrNoBuffer
	}
	size := 0
	for _, l := range bf.Lines {
		size += len(l) + 1
	}
	if maxBytes > 0 && size > maxBytes {
		return &nvim.Snapshot{Buffer: buf, Tick: bf.Tick, TooLarge: true}, nil
	}
	return &nvim.Snapshot{Buffer: buf, Tick: bf.Tick, Lines: append([]string(nil), bf.Lines...)}, nil
}

// SetLinesAt replaces lines start..end (1-based, inclusive; end start-1
// inserts before start) if the buffer's tick is still tick, as the real
// client does.
func (n *Nvim) SetLinesAt(_ context.Context, buf, tick, start, end int, lines []string) (*nvim.Edited, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	bf := n.bufs[buf]
	if bf == nil {
		return nil, nvim.ErrNoBuffer
	}
	if bf.Tick != tick {
		return nil, nvim.ErrTickChanged
	}
	if start < 1 || end < start-1 || end > len(bf.Lines) {
		return nil, fmt.Errorf("nvim: lines %d..%d out of range", start, end)
	}
	out := append(append(append([]string(nil), bf.Lines[:start-1]...), lines...), bf.Lines[end:]...)
	bf.Lines, bf.Modified = out, true
	bf.Tick++
	return &nvim.Edited{Total: len(out), Tick: bf.Tick}, nil
}

func (n *Nvim) Propose(_ context.Context, buf, _, _ int, _ []string, _, token string) (*nvim.Proposal, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	bf := n.bufs[buf]
	if bf == nil {
		return nil, nvim.ErrNoBuffer
	}
	id := fmt.Sprintf("p%d", len(n.props)+1)
	n.props[id] = token
	return &nvim.Proposal{ID: id, Tick: bf.Tick}, nil
}

func (n *Nvim) Withdraw(_ context.Context, id, token string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.props[id] != token {
		return nvim.ErrUnknownProposal
	}
	delete(n.props, id)
	return nil
}

func (n *Nvim) ProposalStatus(_ context.Context, id, token string) (*nvim.ProposalState, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.ready(); err != nil {
		return nil, err
	}
	if n.props[id] != token {
		return nil, nvim.ErrUnknownProposal
	}
	return &nvim.ProposalState{ID: id, State: "pending"}, nil
}

func (n *Nvim) Unrequest(context.Context, string, string) error { return nil }
