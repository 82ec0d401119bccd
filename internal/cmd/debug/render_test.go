package debug_test

import (
	"fmt"
	"html"
	"strconv"
	"strings"
)

// A screen cell as tmux capture-pane -e describes it.
type cell struct {
	r      rune
	fg, bg string // "" is the terminal's default
	bold   bool
}

const (
	defaultFG = "#d0d0d0"
	defaultBG = "#1c1c1c"
	borderFG  = "#5f875f"
)

// xterm256 is the colour of palette entry n.
func xterm256(n int) string {
	base := []string{"#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
		"#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff"}
	switch {
	case n < 16:
		return base[n]
	case n < 232:
		n -= 16
		lv := func(v int) int {
			if v == 0 {
				return 0
			}
			return 55 + 40*v
		}
		return fmt.Sprintf("#%02x%02x%02x", lv(n/36), lv(n/6%6), lv(n%6))
	case n < 256:
		g := 8 + 10*(n-232)
		return fmt.Sprintf("#%02x%02x%02x", g, g, g)
	}
	return ""
}

// parseSGR reads one captured line (text and SGR escapes) into width
// cells.
func parseSGR(line string, width int) []cell {
	cells := make([]cell, 0, width)
	var cur cell
	reverse := false
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		if rs[i] == 0x1b && i+1 < len(rs) && rs[i+1] == '[' {
			j := i + 2
			for j < len(rs) && (rs[j] < 0x40 || rs[j] > 0x7e) {
				j++
			}
			if j < len(rs) && rs[j] == 'm' {
				applySGR(&cur, &reverse, string(rs[i+2:j]))
			}
			i = j
			continue
		}
		if len(cells) == width {
			break
		}
		c := cur
		c.r = rs[i]
		if reverse {
			c.fg, c.bg = c.bg, c.fg
			if c.fg == "" {
				c.fg = defaultBG
			}
			if c.bg == "" {
				c.bg = defaultFG
			}
		}
		cells = append(cells, c)
	}
	for len(cells) < width {
		cells = append(cells, cell{r: ' '})
	}
	return cells
}

func applySGR(c *cell, reverse *bool, params string) {
	ps := strings.Split(params, ";")
	num := func(k int) int {
		if k >= len(ps) {
			return -1
		}
		n, err := strconv.Atoi(ps[k])
		if err != nil {
			return 0
		}
		return n
	}
	for k := 0; k < len(ps); k++ {
		n := num(k)
		switch {
		case n == 0:
			*c, *reverse = cell{}, false
		case n == 1:
			c.bold = true
		case n == 22:
			c.bold = false
		case n == 7:
			*reverse = true
		case n == 27:
			*reverse = false
		case n >= 30 && n <= 37:
			c.fg = xterm256(n - 30)
		case n >= 90 && n <= 97:
			c.fg = xterm256(n - 90 + 8)
		case n == 39:
			c.fg = ""
		case n >= 40 && n <= 47:
			c.bg = xterm256(n - 40)
		case n >= 100 && n <= 107:
			c.bg = xterm256(n - 100 + 8)
		case n == 49:
			c.bg = ""
		case (n == 38 || n == 48) && num(k+1) == 5:
			col := xterm256(num(k + 2))
			if n == 38 {
				c.fg = col
			} else {
				c.bg = col
			}
			k += 2
		case (n == 38 || n == 48) && num(k+1) == 2:
			col := fmt.Sprintf("#%02x%02x%02x", num(k+2)&255, num(k+3)&255, num(k+4)&255)
			if n == 38 {
				c.fg = col
			} else {
				c.bg = col
			}
			k += 4
		}
	}
}

// svg draws a grid of cells as a terminal would, in a monospace font.
func svg(grid [][]cell) string {
	const cw, ch = 8.4, 17.0
	rows, cols := len(grid), 0
	for _, r := range grid {
		cols = max(cols, len(r))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">`+"\n",
		float64(cols)*cw+16, float64(rows)*ch+16)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="%s"/>`+"\n", defaultBG)
	for y, row := range grid {
		// Backgrounds, one rectangle per run of a colour.
		for x := 0; x < len(row); {
			e := x
			for e < len(row) && row[e].bg == row[x].bg {
				e++
			}
			if row[x].bg != "" {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", 8+float64(x)*cw, 8+float64(y)*ch, float64(e-x)*cw, ch, row[x].bg)
			}
			x = e
		}
		// Text, one element per run of a style, each glyph at its column.
		for x := 0; x < len(row); {
			e := x
			for e < len(row) && row[e].fg == row[x].fg && row[e].bold == row[x].bold {
				e++
			}
			var text strings.Builder
			blank := true
			for _, c := range row[x:e] {
				text.WriteRune(c.r)
				blank = blank && c.r == ' '
			}
			if !blank {
				fg := row[x].fg
				if fg == "" {
					fg = defaultFG
				}
				weight := ""
				if row[x].bold {
					weight = ` font-weight="bold"`
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s"%s xml:space="preserve" textLength="%.1f" lengthAdjust="spacingAndGlyphs">%s</text>`+"\n",
					8+float64(x)*cw, 8+float64(y)*ch+13, fg, weight, float64(e-x)*cw, html.EscapeString(text.String()))
			}
			x = e
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
