package tmux_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stem-edu/stem/internal/tmux"
	"github.com/stem-edu/stem/internal/tmux/tmuxtest"
)

var hostileStrings = []string{
	"",
	"plain",
	"two words",
	`"double"`, `'single'`, `it's`, `\`, `\\`, `\n`, `\"`, `\'`, `\$HOME`,
	"a;b", ";", " ; kill-server", "a ; run-shell 'touch canary'",
	"#{pane_id}", "#{E:#{pane_id}}", "#(touch canary)", "#[fg=red]", "##", "# comment",
	"$HOME", "${HOME}", "$", "$1", "$(touch canary)", "`touch canary`",
	"~", "~root", "~/x", "a~b", `"~"`,
	"{", "}", "{ run-shell 'touch canary' }", "}{",
	"%if 1", "%hidden x=1", "%1", "%end 1 2 1", "%begin 1 2 1",
	"line1\nline2", "\n", "trailing\n", "\n\n", "\r", "a\r\nb", "\t", "\x1b[31mred\x1b]0;t\x07",
	"\x7f", "\x01\x02\x03", "\u00a0", "zażółć", "✓ 日本語", "\u202eevil",
	"\xff", "\xc3", "\xed\xa0\x80", "a\xfeb",
	"-F", "--", "-t %0",
	"#", "a#", "##", "#[fg=red]", "##[", "###[x", "#{l:x}", "#S", "#W#T", "#{?pane_active,a,b}", "#,", "#}", "#{", "#(", "#((", "%H:%M",
	strings.Repeat(`"\$~;#`, 500),
}

// roundTrip sets @x to Quote(s) through tmux's parser and reads it back.
func roundTrip(t testing.TB, c *tmux.Client, s string) (string, error) {
	q, err := tmux.Quote(s)
	if err != nil {
		return "", err
	}
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.CommandForTest(ctx, "set-option -g @x "+q); err != nil {
		t.Fatalf("set-option -g @x %s: %v", q, err)
	}
	got, err := c.CommandForTest(ctx, "show-options -gv @x")
	if err != nil {
		t.Fatalf("show-options: %v", err)
	}
	return got, nil
}

func TestQuoteRealTmux(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	for _, h := range hostileStrings {
		got, err := roundTrip(t, c, h)
		if err != nil {
			t.Errorf("Quote(%q): %v", h, err)
			continue
		}
		if got != h {
			t.Errorf("round trip of %q gave %q (quoted %s)", h, got, must(tmux.Quote(h)))
		}
	}
	noCanary(t, s.Dir)
	noCanary(t, s.Home)
	// The server survived everything (no kill-server slipped through).
	if _, err := c.Version(testCtx(t, 5*time.Second)); err != nil {
		t.Fatalf("server gone: %v", err)
	}
}

// formatRoundTrip sets @y to QuoteFormat(s) with set-option -F, which
// expands its value as a format exactly as new-window -n and -c do, and
// reads it back.
func formatRoundTrip(t testing.TB, c *tmux.Client, s string) (string, error) {
	q, err := tmux.QuoteFormat(s)
	if err != nil {
		return "", err
	}
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.CommandForTest(ctx, "set-option -g -F @y "+q); err != nil {
		t.Fatalf("set-option -F @y %s: %v", q, err)
	}
	got, err := c.CommandForTest(ctx, "show-options -gv @y")
	if err != nil {
		t.Fatalf("show-options: %v", err)
	}
	return got, nil
}

func TestQuoteFormatRealTmux(t *testing.T) {
	s := tmuxtest.Start(t)
	c := s.Dial(t)
	for _, h := range hostileStrings {
		got, err := formatRoundTrip(t, c, h)
		if err != nil {
			t.Errorf("QuoteFormat(%q): %v", h, err)
			continue
		}
		if got != h {
			t.Errorf("format round trip of %q gave %q (quoted %s)", h, got, must(tmux.QuoteFormat(h)))
		}
	}
	time.Sleep(100 * time.Millisecond) // #() jobs would run asynchronously
	noCanary(t, s.Dir)
	noCanary(t, s.Home)
}

func TestQuoteRejects(t *testing.T) {
	for _, s := range []string{"a\x00b", strings.Repeat("x", tmux.MaxQuoted+1)} {
		if _, err := tmux.Quote(s); !errors.Is(err, tmux.ErrInvalidArgument) {
			t.Errorf("Quote(%.20q) err = %v", s, err)
		}
	}
	q, _ := tmux.Quote("a\nb\"$~\\")
	if strings.ContainsAny(q, "\n\r") {
		t.Fatalf("Quote left a line break: %q", q)
	}
}

// FuzzQuote checks every input against a real tmux server: Quote either
// refuses (NUL, too long) or tmux's parser gives back exactly the input.
func FuzzQuote(f *testing.F) {
	for _, h := range hostileStrings {
		f.Add(h)
	}
	s := tmuxtest.Start(f)
	c := s.Dial(f)
	f.Fuzz(func(t *testing.T, in string) {
		if got, err := formatRoundTrip(t, c, in); err == nil && got != in {
			t.Fatalf("format round trip of %q gave %q", in, got)
		}
		got, err := roundTrip(t, c, in)
		if err != nil {
			if !strings.Contains(in, "\x00") && len(in) <= tmux.MaxQuoted {
				t.Fatalf("Quote(%q) refused: %v", in, err)
			}
			return
		}
		if got != in {
			t.Fatalf("round trip of %q (valid UTF-8 %v) gave %q", in, utf8.ValidString(in), got)
		}
	})
}

func must(s string, err error) string {
	if err != nil {
		return "ERR " + err.Error()
	}
	return s
}
