package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/errcode"
)

// The fast encoder must write what mcp-go's own marshalling writes.
func TestAppendMessageMatchesMCPGo(t *testing.T) {
	two := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("{\"a\":\"b\\tc\"}"), mcp.NewTextContent("line\n\"two\" \xff <&> \u2028")}}
	failed := mcp.NewToolResultError("bad input: path \"../x\" leaves the card repo")
	typed := mcp.NewToolResultText("x")
	typed.ResultType = "complete"
	structured := mcp.NewToolResultText("s")
	structured.StructuredContent = map[string]any{"k": 1}
	coded := ErrorResult(errcode.NotEditable, "nvim_buffer_edit refused: \"t1/a\tb.c\" \xff <&> \u2028 \x1b]0;x\x07 is not editable")
	if !plainToolResult(coded) || plainToolResult(structured) {
		t.Fatal("a coded tool error must take the fast path, other structured content must not")
	}
	for i, m := range []mcp.JSONRPCMessage{
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(7)), mcp.NewToolResultText(`{"text":"  1\tint main\n"}`)),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId("str-id"), two),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(1), failed),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(2), typed),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(3), structured),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(5), coded),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(6), *coded),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(4), *mcp.NewToolResultText("by value")),
		mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.PARSE_ERROR, "Parse error", nil),
	} {
		got, err := appendMessage(nil, m)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		want, _ := json.Marshal(m)
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%d: invalid JSON %s: %v", i, got, err)
		}
		json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestRequestID(t *testing.T) {
	for raw, want := range map[string]any{``: nil, `null`: nil, `"a"`: "a", `12`: int64(12), `1.5`: 1.5,
		`-3`: int64(-3), `""`: "", `"a\"b"`: `a"b`, `"\u0041"`: "A", `1e2`: float64(100), `99999999999999999999`: 1e20} {
		if got, ok := requestID(json.RawMessage(raw)); !ok || got != want {
			t.Errorf("requestID(%s) = %v, %v; want %v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`{}`, `[1]`, `true`} {
		if _, ok := requestID(json.RawMessage(raw)); ok {
			t.Errorf("requestID(%s) accepted", raw)
		}
	}
}

func TestUnicodeProblem(t *testing.T) {
	for _, line := range []string{
		`{"a":"plain"}`, `{"a":"é ✓ 😀"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\uD83D\uDE00 \u00e9"}`, `{"a":"\\ud800"}`,
		`{"a":"\\\ud83d\ude00"}`, `{"a":"\"\ud83d\ude00\""}`, `{"a":"\ufffd"}`, "{\"a\":\"\uFFFD\"}", `{"a":"\\"}`,
	} {
		if msg := unicodeProblem([]byte(line)); msg != "" {
			t.Errorf("%s: %s", line, msg)
		}
	}
	for line, want := range map[string]string{
		"{\"a\":\"\xff\"}":           "invalid UTF-8 at byte 6",
		"{\"a\":\"\xc0\x80\"}":       "invalid UTF-8 at byte 6",
		"{\"a\":\"\xed\xa0\x80\"}":   "invalid UTF-8 at byte 6", // a surrogate encoded as UTF-8
		"{\"a\":\"é\xe2\x9c\"}":      "invalid UTF-8 at byte 8", // cut short
		`{"a":"\ud800"}`:             `lone surrogate \ud800 at byte 6`,
		`{"a":"\uDFFF"}`:             `lone surrogate \udfff at byte 6`,
		`{"a":"\ud800\u0041"}`:       `lone surrogate \ud800 at byte 6`,
		`{"a":"\ud800\ud800"}`:       `lone surrogate \ud800 at byte 6`,
		`{"a":"x\ude00\ud83d"}`:      `lone surrogate \ude00 at byte 7`,
		`{"a":"\\\ud800"}`:           `lone surrogate \ud800 at byte 8`,
		`{"a":"\ud83d\ude00\ud83d"}`: `lone surrogate \ud83d at byte 18`,
	} {
		if msg := unicodeProblem([]byte(line)); !strings.HasPrefix(msg, want) {
			t.Errorf("%q: %q, want %q", line, msg, want)
		}
	}
}

// FuzzUnicodeProblem: whatever a well-behaved encoder writes for valid text
// is never refused.
func FuzzUnicodeProblem(f *testing.F) {
	for _, s := range []string{"", "plain", "é😀", `\ud800`, "\\", "\"", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		line, err := json.Marshal(map[string]any{"a": s, "b": []string{s, s}})
		if err != nil {
			t.Fatal(err)
		}
		if msg := unicodeProblem(line); msg != "" {
			t.Fatalf("%q encoded as %s: %s", s, line, msg)
		}
	})
}
