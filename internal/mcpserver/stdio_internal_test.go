package mcpserver

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The fast encoder must write what mcp-go's own marshalling writes.
func TestAppendMessageMatchesMCPGo(t *testing.T) {
	two := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("{\"a\":\"b\\tc\"}"), mcp.NewTextContent("line\n\"two\" \xff <&> \u2028")}}
	failed := mcp.NewToolResultError("bad input: path \"../x\" leaves the card repo")
	typed := mcp.NewToolResultText("x")
	typed.ResultType = "complete"
	structured := mcp.NewToolResultText("s")
	structured.StructuredContent = map[string]any{"k": 1}
	for i, m := range []mcp.JSONRPCMessage{
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(7)), mcp.NewToolResultText(`{"text":"  1\tint main\n"}`)),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId("str-id"), two),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(1), failed),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(2), typed),
		mcp.NewJSONRPCResultResponse(mcp.NewRequestId(3), structured),
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
	for raw, want := range map[string]any{``: nil, `null`: nil, `"a"`: "a", `12`: int64(12), `1.5`: 1.5} {
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
