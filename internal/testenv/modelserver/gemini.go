package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// geminiRequest is the part of a generateContent request the server reads.
type geminiRequest struct {
	Contents []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"contents"`
	SystemInstruction any `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

func (s *Server) gemini(w http.ResponseWriter, req *http.Request, body []byte) {
	var in geminiRequest
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, `{"error":{"code":400,"message":"bad JSON","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
		return
	}
	model := req.URL.Path
	if i := strings.LastIndex(model, "/models/"); i >= 0 {
		model = model[i+len("/models/"):]
	}
	model, _, _ = strings.Cut(model, ":")
	r := Request{API: Gemini, Path: req.URL.Path, Header: req.Header.Clone(), Body: body, Model: model, System: textOf(in.SystemInstruction), Time: time.Now()}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			r.Tools = append(r.Tools, f.Name)
		}
	}
	for _, c := range in.Contents {
		if c.Role == "user" {
			var texts []string
			for _, p := range c.Parts {
				if t, ok := p["text"].(string); ok {
					texts = append(texts, t)
				}
			}
			if len(texts) > 0 {
				r.Prompt = strings.Join(texts, "\n")
			}
		}
		for _, p := range c.Parts {
			fr, ok := p["functionResponse"].(map[string]any)
			if !ok {
				continue
			}
			id, _ := fr["id"].(string)
			if id == "" {
				id, _ = fr["name"].(string)
			}
			resp, _ := json.Marshal(fr["response"])
			content := textOf(fr["response"])
			if content == "" {
				content = string(resp)
			}
			r.Results = append(r.Results, ToolResult{CallID: id, Content: content})
		}
	}
	step, st, name := s.take(&r, len(in.Contents))
	r.Step = step
	var part map[string]any
	if st.Tool != "" {
		r.Called = name
		part = map[string]any{"functionCall": map[string]any{"id": s.callID("gcall_stem", step), "name": name, "args": orEmpty(st.Args)}}
	}
	if part == nil {
		part = map[string]any{"text": st.Text}
	}
	s.record(r)
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  model,
	}
	if !strings.Contains(req.URL.Path, ":streamGenerateContent") {
		writeJSON(w, resp)
		return
	}
	newSSE(w).event("", resp)
}
