package modelserver

import (
	"encoding/json"
	"net/http"
	"time"
)

// responsesRequest is the part of a Responses request the server reads.
type responsesRequest struct {
	Model        string            `json:"model"`
	Stream       bool              `json:"stream"`
	Instructions string            `json:"instructions"`
	Input        []json.RawMessage `json:"input"`
	Tools        []json.RawMessage `json:"tools"`
}

// responsesTool is a tool entry: a function, or a namespace of functions
// (newer CLIs group an MCP server's tools under one).
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// names adds the tool's callable names to ns (flat name -> namespace):
// a namespace's tools are listed as NAMESPACE__TOOL, and called by their
// own name with the namespace beside it.
func (t responsesTool) names(ns map[string]string, out []string) []string {
	if t.Type == "namespace" {
		for _, sub := range t.Tools {
			flat := t.Name + "__" + sub.Name
			ns[flat] = t.Name
			out = append(out, flat)
		}
		return out
	}
	if t.Name != "" {
		out = append(out, t.Name)
	}
	return out
}

func (s *Server) openai(w http.ResponseWriter, req *http.Request, body []byte) {
	var in responsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, `{"error":{"type":"invalid_request_error","message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	r := Request{API: OpenAI, Path: req.URL.Path, Header: req.Header.Clone(), Body: body, Model: in.Model, System: in.Instructions, Time: time.Now()}
	ns := map[string]string{}
	for _, raw := range in.Tools {
		var t responsesTool
		if json.Unmarshal(raw, &t) == nil {
			r.Tools = t.names(ns, r.Tools)
		}
	}
	for _, raw := range in.Input {
		var it map[string]any
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it["type"] {
		case "function_call_output", "custom_tool_call_output":
			id, _ := it["call_id"].(string)
			r.Results = append(r.Results, ToolResult{CallID: id, Content: textOf(it["output"])})
		case "message":
			if it["role"] == "developer" || it["role"] == "system" {
				r.System += "\n" + textOf(it["content"])
			}
			if it["role"] == "user" {
				if t := userText(it["content"]); t != "" {
					r.Prompt = t
				}
			}
		}
	}
	step, st, name := s.take(&r, len(in.Input))
	r.Step = step
	var item map[string]any
	if st.Tool != "" {
		r.Called = name
		args, _ := json.Marshal(orEmpty(st.Args))
		item = map[string]any{"type": "function_call", "id": "fc_stem", "call_id": s.callID("call_stem", step),
			"name": name, "arguments": string(args), "status": "completed"}
		if n, ok := ns[name]; ok {
			item["name"], item["namespace"] = name[len(n)+2:], n
		}
	}
	if item == nil {
		item = map[string]any{"type": "message", "id": "msg_stem", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": st.Text, "annotations": []any{}}}}
	}
	s.record(r)
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	resp := map[string]any{"id": "resp_stem", "object": "response", "created_at": time.Now().Unix(), "model": in.Model,
		"status": "completed", "output": []any{item}, "usage": usage}
	if !in.Stream {
		writeJSON(w, resp)
		return
	}
	e := newSSE(w)
	created := map[string]any{"id": "resp_stem", "object": "response", "created_at": resp["created_at"], "model": in.Model, "status": "in_progress", "output": []any{}}
	e.event("response.created", map[string]any{"type": "response.created", "response": created})
	e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if item["type"] == "message" {
		e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_stem",
			"output_index": 0, "content_index": 0, "delta": st.Text})
	} else {
		e.event("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta",
			"item_id": "fc_stem", "output_index": 0, "delta": item["arguments"]})
	}
	e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	e.event("response.completed", map[string]any{"type": "response.completed", "response": resp})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
