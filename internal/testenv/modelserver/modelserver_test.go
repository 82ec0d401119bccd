package modelserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// post sends body to path and returns the SSE data lines (or the one JSON
// body when the answer is not a stream).
func post(t *testing.T, s *Server, path, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", path, resp.Status)
	}
	var out []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return append(out, m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("bad event %q: %v", d, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestAnthropicScript(t *testing.T) {
	s, err := Start(Call("pane_list", map[string]any{"all": true}), Say("done"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A side request without tools takes no step.
	post(t, s, "/v1/messages?beta=true", `{"model":"haiku","stream":true,"messages":[{"role":"user","content":"title?"}]}`)
	evs := post(t, s, "/v1/messages", `{"model":"m","stream":true,"system":[{"type":"text","text":"SYS"}],
		"tools":[{"name":"Bash"},{"name":"mcp__stem__pane_list"}],"messages":[{"role":"user","content":"hi"}]}`)
	start := evs[1]["content_block"].(map[string]any)
	if start["type"] != "tool_use" || start["name"] != "mcp__stem__pane_list" {
		t.Fatalf("events %v", evs)
	}
	if evs[2]["delta"].(map[string]any)["partial_json"] != `{"all":true}` || evs[len(evs)-2]["delta"].(map[string]any)["stop_reason"] != "tool_use" {
		t.Fatalf("events %v", evs)
	}
	id := start["id"].(string)
	evs = post(t, s, "/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"mcp__stem__pane_list"}],"messages":[
		{"role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"mcp__stem__pane_list","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":[{"type":"text","text":"%1 shell"}]}]}]}`)
	if evs[2]["delta"].(map[string]any)["text"] != "done" {
		t.Fatalf("second answer %v", evs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := s.WaitResult(ctx, 0)
	if err != nil || res.Content != "%1 shell" {
		t.Fatalf("result %+v %v", res, err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Step != -1 || reqs[1].System != "SYS" || reqs[1].Called != "mcp__stem__pane_list" || !reqs[1].HasTool("pane_list") {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestOpenAIResponsesScript(t *testing.T) {
	s, err := Start(Call("task_info", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := post(t, s, "/v1/responses", `{"model":"m","stream":true,"instructions":"INS","tools":[{"type":"namespace","name":"mcp__stem","tools":[{"type":"function","name":"task_info"}]}],"input":[]}`)
	var done map[string]any
	for _, e := range evs {
		if e["type"] == "response.output_item.done" {
			done = e["item"].(map[string]any)
		}
	}
	if done == nil || done["name"] != "task_info" || done["namespace"] != "mcp__stem" || done["arguments"] != "{}" || evs[len(evs)-1]["type"] != "response.completed" {
		t.Fatalf("events %v", evs)
	}
	post(t, s, "/v1/responses", `{"model":"m","stream":true,"tools":[{"type":"function","name":"other"}],
		"input":[{"type":"function_call_output","call_id":"`+done["call_id"].(string)+`","output":"{\"task\":\"1\"}"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if res, err := s.WaitResult(ctx, 0); err != nil || res.Content != `{"task":"1"}` {
		t.Fatalf("result %+v %v", res, err)
	}
}

func TestGeminiScript(t *testing.T) {
	s, err := Start(Call("pane_capture", map[string]any{"pane": "%1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := post(t, s, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
		"tools":[{"functionDeclarations":[{"name":"pane_capture"}]}]}`)
	fc := evs[0]["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["functionCall"].(map[string]any)
	if fc["name"] != "pane_capture" || fc["args"].(map[string]any)["pane"] != "%1" {
		t.Fatalf("events %v", evs)
	}
	post(t, s, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"functionResponse":{"id":"`+fc["id"].(string)+`","name":"pane_capture","response":{"output":"text"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"pane_capture"}]}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if res, err := s.WaitResult(ctx, 0); err != nil || res.Content != "text" {
		t.Fatalf("result %+v %v", res, err)
	}
	if r := s.Requests()[0]; r.Model != "gemini-x" {
		t.Fatalf("model %q", r.Model)
	}
}

func TestMatchTool(t *testing.T) {
	offered := []string{"Bash", "mcp__stem__pane_list", "stem.task_info", "nvim_hint", "mcp_stem_gdb_step"}
	for name, want := range map[string]string{"pane_list": "mcp__stem__pane_list", "task_info": "stem.task_info", "nvim_hint": "nvim_hint", "hint": "", "gdb_break": "", "gdb_step": "mcp_stem_gdb_step", "step": ""} {
		if got := matchTool(offered, name); got != want {
			t.Errorf("matchTool(%q) = %q, want %q", name, got, want)
		}
	}
}

// Prompt is the last user message's text in each API, tool results left
// out.
func TestPrompt(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post(t, s, "/v1/messages", `{"model":"m","tools":[{"name":"x"}],"messages":[{"role":"user","content":"first"},
		{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"R"},{"type":"text","text":"[stem event] one"}]}]}`)
	post(t, s, "/v1/responses", `{"model":"m","tools":[{"type":"function","name":"x"}],"input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
		{"type":"function_call_output","call_id":"c","output":"R"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"[stem event] two"}]}]}`)
	post(t, s, "/v1beta/models/g:generateContent", `{"tools":[{"functionDeclarations":[{"name":"x"}]}],"contents":[
		{"role":"user","parts":[{"text":"first"}]},{"role":"model","parts":[{"text":"ok"}]},
		{"role":"user","parts":[{"functionResponse":{"name":"x","response":{"output":"R"}}}]},
		{"role":"user","parts":[{"text":"[stem event] three"}]}]}`)
	reqs := s.Requests()
	for i, want := range []string{"[stem event] one", "[stem event] two", "[stem event] three"} {
		if reqs[i].Prompt != want {
			t.Errorf("request %d (%s): prompt %q, want %q", i, reqs[i].API, reqs[i].Prompt, want)
		}
	}
}

// A request sent again (the CLI gave up on the stream) takes the step it
// took before; the next turn, which carries that step's result, takes the
// next one.
func TestSameRequestAgainTakesTheSameStep(t *testing.T) {
	s, err := Start(Call("pane_list", nil), Call("task_info", nil), Say("done"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	called := func(evs []map[string]any) string {
		for _, e := range evs {
			if cb, ok := e["content_block"].(map[string]any); ok && cb["type"] == "tool_use" {
				return cb["name"].(string) + " " + cb["id"].(string)
			}
			if cb, ok := e["content_block"].(map[string]any); ok && cb["type"] == "text" {
				return "text"
			}
		}
		return ""
	}
	first := `{"model":"m","stream":true,"tools":[{"name":"pane_list"},{"name":"task_info"}],"messages":[{"role":"user","content":"hi"}]}`
	a := called(post(t, s, "/v1/messages", first))
	b := called(post(t, s, "/v1/messages", first))
	if !strings.HasPrefix(a, "pane_list ") || !strings.HasPrefix(b, "pane_list ") {
		t.Fatalf("the same request twice: %q then %q, want pane_list both times", a, b)
	}
	id := strings.Fields(b)[1]
	next := `{"model":"m","stream":true,"tools":[{"name":"pane_list"},{"name":"task_info"}],"messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"pane_list","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"panes"}]}]}`
	if c := called(post(t, s, "/v1/messages", next)); !strings.HasPrefix(c, "task_info ") {
		t.Fatalf("the next turn took %q, want task_info", c)
	}
	if res, err := s.WaitResult(context.Background(), 0); err != nil || res.Content != "panes" {
		t.Fatalf("step 0's result: %+v %v", res, err)
	}
}
