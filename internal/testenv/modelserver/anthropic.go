package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// anthropicRequest is the part of a Messages request the server reads.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	System   any    `json:"system"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (s *Server) anthropic(w http.ResponseWriter, req *http.Request, body []byte) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	r := Request{API: Anthropic, Path: req.URL.Path, Header: req.Header.Clone(), Body: body, Model: in.Model, System: textOf(in.System), Time: time.Now()}
	for _, t := range in.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	for _, m := range in.Messages {
		if m.Role == "user" {
			if t := userText(m.Content); t != "" {
				r.Prompt = t
			}
		}
		parts, _ := m.Content.([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			if pm["type"] != "tool_result" {
				continue
			}
			id, _ := pm["tool_use_id"].(string)
			isErr, _ := pm["is_error"].(bool)
			r.Results = append(r.Results, ToolResult{CallID: id, Content: textOf(pm["content"]), IsError: isErr})
		}
	}
	step, st, name := s.take(&r, len(in.Messages))
	r.Step = step
	var block map[string]any
	stop := "end_turn"
	if st.Tool != "" {
		r.Called = name
		args := st.Args
		if args == nil {
			args = map[string]any{}
		}
		block = map[string]any{"type": "tool_use", "id": s.callID("toolu_stem", step), "name": name, "input": args}
		stop = "tool_use"
	}
	if block == nil {
		block = map[string]any{"type": "text", "text": st.Text}
	}
	s.record(r)
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	msg := map[string]any{"id": "msg_stem", "type": "message", "role": "assistant", "model": in.Model,
		"stop_reason": nil, "stop_sequence": nil, "usage": usage, "content": []any{}}
	if !in.Stream {
		msg["content"], msg["stop_reason"] = []any{block}, stop
		writeJSON(w, msg)
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": msg})
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		start := map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// userText is the text of a user message's content: a string, or its
// text parts (tool results left out).
func userText(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	parts, _ := c.([]any)
	var out []string
	for _, p := range parts {
		if pm, ok := p.(map[string]any); ok && (pm["type"] == "text" || pm["type"] == "input_text") {
			if t, ok := pm["text"].(string); ok {
				out = append(out, t)
			}
		}
	}
	return strings.Join(out, "\n")
}
