package errcode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[Code]bool{}
	for _, in := range All() {
		if !wellFormed(string(in.Code)) || len(in.Code) > 38 {
			t.Errorf("%q is not a code (lower case words joined by _)", in.Code)
		}
		if seen[in.Code] {
			t.Errorf("%s is in the table twice", in.Code)
		}
		seen[in.Code] = true
		if in.When == "" {
			t.Errorf("%s does not say when it applies", in.Code)
		}
		if got, ok := Lookup(in.Code); !ok || got != in {
			t.Errorf("Lookup(%s) = %+v, %v", in.Code, got, ok)
		}
	}
	if _, ok := Lookup("no_such_code"); ok || IsRefusal("no_such_code") {
		t.Error("a code outside the table is known")
	}
	// All is a copy: a caller cannot change the table.
	All()[0].Code = "changed"
	if All()[0].Code == "changed" {
		t.Error("All returned the table itself")
	}
}

func TestOfReadsTheCodeThroughWrapping(t *testing.T) {
	t.Parallel()
	base := errors.New("the card's manifest lists no such file")
	coded := New(NotEditable, base)
	for _, tc := range []struct {
		err  error
		want Code
	}{
		{nil, ""},
		{base, Internal},
		{coded, NotEditable},
		{fmt.Errorf("nvim_buffer_edit: %w", coded), NotEditable},
		{Errorf(PolicyRefused, "refused: %w", coded), PolicyRefused}, // the outermost code
		{fmt.Errorf("read: %w", context.DeadlineExceeded), Timeout},
		{New(PartDown, fmt.Errorf("dial: %w", context.DeadlineExceeded)), PartDown},
		{context.Canceled, Internal},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if coded.Error() != base.Error() || !errors.Is(coded, base) {
		t.Errorf("the code changed the error: %q", coded)
	}
	var e *Error
	if !errors.As(fmt.Errorf("x: %w", coded), &e) || e.Code != NotEditable {
		t.Error("errors.As does not find the code")
	}
	if !Refused(coded) || Refused(base) || Refused(New(PartDown, base)) || Refused(nil) {
		t.Error("Refused does not follow the table")
	}
}

func TestTagAndCut(t *testing.T) {
	t.Parallel()
	for _, in := range All() {
		line := Tag(in.Code) + "refused: [x] y"
		c, rest, ok := Cut(line)
		if !ok || c != in.Code || rest != "refused: [x] y" {
			t.Errorf("Cut(%q) = %q, %q, %v", line, c, rest, ok)
		}
	}
	for _, line := range []string{"", "refused: grant g0 does not exist (revoked?)", "[] x", "[Revoked] x", "[revoked", "[re voked] x",
		"[_x] y", "[x_] y", "[" + strings.Repeat("a", 60) + "] y", "[rev\x1bked] x", "x [revoked] y"} {
		if c, rest, ok := Cut(line); ok || rest != line {
			t.Errorf("Cut(%q) = %q, %q, %v; want no code", line, c, rest, ok)
		}
	}
	// A newer program's code is read as a code, unknown to this table.
	if c, _, ok := Cut("[some_new_code] x"); !ok || c != "some_new_code" {
		t.Errorf("a newer code: %q %v", c, ok)
	}
}

func TestWire(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(Wire{Error: WireError{Code: NotEditable, Message: "nvim_buffer_edit refused: <x>"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":{"code":"not_editable","message":"nvim_buffer_edit refused: \u003cx\u003e"}}`; string(data) != want {
		t.Fatalf("%s, want %s", data, want)
	}
}

// Every code is documented in docs/errors.md (when it happens, what to
// do), and the page documents no code the table lacks.
func TestEveryCodeIsDocumented(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|([^|]+)\\|([^|]+)\\|")
	documented := map[Code]bool{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		c := Code(m[1])
		if _, ok := Lookup(c); !ok {
			t.Errorf("docs/errors.md documents %s, which is not in the table", c)
		}
		if strings.TrimSpace(m[2]) == "" || strings.TrimSpace(m[3]) == "" {
			t.Errorf("docs/errors.md: %s lacks when it happens or what to do", c)
		}
		documented[c] = true
	}
	for _, in := range All() {
		if !documented[in.Code] {
			t.Errorf("%s is not documented in docs/errors.md (a row \"| `%s` | when | what to do |\")", in.Code, in.Code)
		}
	}
}
