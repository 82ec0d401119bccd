package supervisor

// apcStrip drops APC strings (ESC _ ... ESC \) from an agent's output on
// its way to the student's tmux. Agent CLIs send them to ask the terminal
// about kitty graphics; tmux takes an APC string as the pane's title, so
// the query (Gi=31,s=1,v=1,a=q,t=d;...) would stand in the student's
// status line. Everything else passes untouched: the CLIs' other queries
// are tmux's to answer. The state carries over from one read to the next;
// an ESC at the end of a read is held until the next byte shows what it
// starts.
type apcStrip struct {
	st apcState
}

type apcState uint8

const (
	apcGround apcState = iota
	apcEsc             // ESC seen, not yet passed on
	apcIn              // inside an APC string
	apcInEsc           // ESC inside one: ST if a backslash follows
)

const (
	esc = 0x1b
	can = 0x18 // CAN and SUB end any control string
	sub = 0x1a
)

// filter appends p, without its APC strings, to out.
func (f *apcStrip) filter(out, p []byte) []byte {
	for _, b := range p {
		switch f.st {
		case apcGround:
			if b == esc {
				f.st = apcEsc
				continue
			}
			out = append(out, b)
		case apcEsc:
			switch b {
			case '_':
				f.st = apcIn
			case esc:
				out = append(out, esc)
			default:
				out = append(out, esc, b)
				f.st = apcGround
			}
		case apcIn:
			switch b {
			case esc:
				f.st = apcInEsc
			case can, sub:
				f.st = apcGround
			}
		case apcInEsc:
			switch b {
			case '\\':
				f.st = apcGround
			case esc:
				// still inside: another ESC may start the ST
			case '_':
				f.st = apcIn // ESC _ starts another string
			default:
				// The string ends at the ESC, which starts a sequence.
				out = append(out, esc, b)
				f.st = apcGround
			}
		}
	}
	return out
}
