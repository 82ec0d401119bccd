package mcpserver_test

// Protocol abuse over the real stdio transport: malformed JSON-RPC, an
// oversized message, calls before initialize, raw bytes JSON allows only
// escaped, and floods. The server must answer each clearly and go on
// serving.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// errorCode returns a JSON-RPC error's code and message ("" if none).
func errorCode(m map[string]any) (int, string) {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0, ""
	}
	return num(e["code"]), str(e["message"])
}

// alive checks that a valid call still works.
func (r *rawServer) alive(id any, in string) {
	r.t.Helper()
	m := r.callTool(id, "session_status", map[string]any{})
	if !strings.Contains(mustJSON(m), in) {
		r.t.Fatalf("a valid call after the abuse: %s", clip(mustJSON(m), 500))
	}
}

func TestProtocolAbuse(t *testing.T) {
	in := fixture(t)
	r := startRaw(t, in, "assist")

	t.Run("call before initialize", func(t *testing.T) {
		r.t = t
		r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": "early", "method": "tools/call", "params": map[string]any{"name": "session_status", "arguments": map[string]any{}}})
		m := r.reply("early", 20*time.Second)
		code, msg := errorCode(m)
		res := mustJSON(m["result"])
		t.Logf("tools/call before initialize: error %d %q, result %s", code, msg, clip(res, 200))
		if code != -32002 || !strings.Contains(msg, "initialize") || m["result"] != nil {
			t.Fatalf("a call before initialize: want error -32002 naming initialize, got %s", mustJSON(m))
		}
		// ping is allowed before the handshake.
		r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": "early-ping", "method": "ping"})
		if m := r.reply("early-ping", 20*time.Second); m["result"] == nil {
			t.Fatalf("ping before initialize: %s", mustJSON(m))
		}
		r.initialize()
		r.alive(1, in.Name)
	})

	t.Run("malformed lines", func(t *testing.T) {
		r.t = t
		for i, c := range []struct {
			line     string
			wantCode int // 0: no reply expected (notification-like)
		}{
			{"{", -32700},
			{"not json at all", -32700},
			{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_status"`, -32700},
			{"\x00\x01\x02", -32700},
			{"{\"jsonrpc\":\"2.0\",\"id\":\"nul\",\"method\":\"ping\",\"x\":\"a\x00b\"}", -32700},
			{strings.Repeat("[", 100000) + strings.Repeat("]", 100000), -32700},
			{`{"jsonrpc":"2.0","id":"nomethod"}`, -32600},
			{`{"jsonrpc":"2.0","id":"unknown","method":"no/such/method"}`, -32601},
			{`{"jsonrpc":"2.0","id":"badparams","method":"tools/call","params":"a string"}`, -32602},
			{`{"jsonrpc":"2.0","id":"noname","method":"tools/call","params":{"arguments":{}}}`, -32602},
			{`{"jsonrpc":"2.0","id":"numname","method":"tools/call","params":{"name":5}}`, -32602},
			{`{"jsonrpc":"2.0","id":"argsarray","method":"tools/call","params":{"name":"pane_list","arguments":[1,2]}}`, -32602},
			{`{"jsonrpc":"2.0","id":"lvl","method":"tools/call","params":{"name":"nvim_lua","arguments":{"code":"os.execute('x')"}}}`, -32602},
		} {
			r.send([]byte(c.line + "\n"))
			m := r.next(20 * time.Second)
			code, msg := errorCode(m)
			if code == 0 {
				// A tool error result is also a clear refusal.
				if res, ok := m["result"].(map[string]any); !ok || res["isError"] != true {
					t.Errorf("line %d %q: want an error, got %s", i, clip(c.line, 80), clip(mustJSON(m), 300))
				}
				continue
			}
			// mcp-go answers params it cannot decode as an invalid request
			// (-32600) rather than invalid params (-32602): either says the
			// request was malformed; any other code does not.
			if code != c.wantCode && !(c.wantCode == -32602 && code == -32600) {
				t.Errorf("line %d %q: error %d %q, want %d", i, clip(c.line, 80), code, msg, c.wantCode)
			}
			if msg == "" {
				t.Errorf("line %d: error without a message: %s", i, mustJSON(m))
			}
		}
		// A batch is not part of MCP's JSON-RPC: refused, not executed.
		r.send([]byte(`[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","id":"b2","method":"ping"}]` + "\n"))
		m := r.next(20 * time.Second)
		if code, _ := errorCode(m); code == 0 {
			t.Errorf("a batch: %s", mustJSON(m))
		}
		// Blank lines and CRLF line ends do not upset the reader.
		r.send([]byte("\n\r\n"))
		r.send([]byte(`{"jsonrpc":"2.0","id":"crlf","method":"ping"}` + "\r\n"))
		for {
			m := r.next(20 * time.Second)
			if m["id"] == "crlf" {
				break
			}
		}
		r.alive(2, in.Name)
	})

	t.Run("raw bytes in strings", func(t *testing.T) {
		r.t = t
		for i, line := range []string{
			"{\"jsonrpc\":\"2.0\",\"id\":\"u1\",\"method\":\"tools/call\",\"params\":{\"name\":\"nvim_buffer_read\",\"arguments\":{\"path\":\"t1/\xff\xfe.c\"}}}",
			`{"jsonrpc":"2.0","id":"u2","method":"tools/call","params":{"name":"nvim_buffer_read","arguments":{"path":"t1/words.c\u0000.txt"}}}`,
			`{"jsonrpc":"2.0","id":"u3","method":"tools/call","params":{"name":"nvim_buffer_read","arguments":{"path":"t1/\ud800.c"}}}`,
			`{"jsonrpc":"2.0","id":"u4","method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"%0\u0000; run-shell 'touch /tmp/x'"}}}`,
			`{"jsonrpc":"2.0","id":"u5","method":"tools/call","params":{"name":"nvim_open","arguments":{"path":"t1/\u001b]52;c;x\u0007.c"}}}`,
			`{"jsonrpc":"2.0","id":"u6","method":"tools/call","params":{"name":"pane_send_keys","arguments":{"pane":"%1","keys":"\u0000"}}}`,
		} {
			r.send([]byte(line + "\n"))
			id := fmt.Sprintf("u%d", i+1)
			m := r.reply(id, 20*time.Second)
			res, _ := m["result"].(map[string]any)
			if code, _ := errorCode(m); code == 0 && (res == nil || res["isError"] != true) {
				t.Errorf("%s: accepted: %s", id, clip(mustJSON(m), 400))
			}
		}
		r.alive(3, in.Name)
	})

	t.Run("message over 4 MiB", func(t *testing.T) {
		r.t = t
		big := fmt.Sprintf(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"nvim_buffer_read","arguments":{"path":"%s"}}}`, strings.Repeat("A", 5<<20))
		t0 := time.Now()
		r.send([]byte(big + "\n"))
		m := r.next(30 * time.Second)
		code, msg := errorCode(m)
		if code != -32700 || m["id"] != nil {
			t.Fatalf("a 5 MiB message: want a parse error without id, got %s", clip(mustJSON(m), 300))
		}
		t.Logf("5 MiB message dropped in %v: %d %q", time.Since(t0), code, msg)
		waitUntil(t, 5*time.Second, "stderr says the message was dropped", func() bool {
			return strings.Contains(r.stderr.String(), "dropped a message over")
		})
		// Just under the limit: parsed, refused by the schema.
		under := fmt.Sprintf(`{"jsonrpc":"2.0","id":"under","method":"tools/call","params":{"name":"nvim_buffer_read","arguments":{"path":"%s"}}}`, strings.Repeat("A", 4<<20-200))
		r.send([]byte(under + "\n"))
		m = r.reply("under", 30*time.Second)
		if res, _ := m["result"].(map[string]any); res == nil || res["isError"] != true {
			t.Fatalf("a message just under 4 MiB: %s", clip(mustJSON(m), 300))
		}
		// Several oversized messages in a row, then a valid one.
		for i := 0; i < 3; i++ {
			r.send([]byte(big + "\n"))
		}
		for i := 0; i < 3; i++ {
			if code, _ := errorCode(r.next(30 * time.Second)); code != -32700 {
				t.Fatal("an oversized message was not answered with a parse error")
			}
		}
		r.alive(4, in.Name)
	})

	t.Run("flood", func(t *testing.T) {
		r.t = t
		const n = 600
		var b strings.Builder
		for i := 0; i < n; i++ {
			switch i % 4 {
			case 0:
				fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"f%d","method":"tools/call","params":{"name":"pane_list","arguments":{}}}`+"\n", i)
			case 1:
				fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"f%d","method":"tools/call","params":{"name":"nvim_status","arguments":{}}}`+"\n", i)
			case 2:
				fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"f%d","method":"ping"}`+"\n", i)
			case 3:
				fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"f%d","method":"tools/call","params":{"name":"pane_capture","arguments":{"pane":"%%999"}}}`+"\n", i)
			}
		}
		t0 := time.Now()
		r.send([]byte(b.String()))
		seen := map[string]bool{}
		for len(seen) < n {
			m := r.next(60 * time.Second)
			id := str(m["id"])
			if !strings.HasPrefix(id, "f") {
				continue
			}
			if seen[id] {
				t.Fatalf("two answers for %s", id)
			}
			seen[id] = true
			if code, msg := errorCode(m); code != 0 {
				t.Errorf("%s: error %d %s", id, code, msg)
			}
		}
		t.Logf("%d pipelined requests answered in %v", n, time.Since(t0))
		r.alive(5, in.Name)
	})
}

// TestSchemaRefusalsInWords: arguments the schema refuses are explained in
// words naming the argument and what the tool takes, never as Go structs;
// a huge argument name comes back clipped.
func TestSchemaRefusalsInWords(t *testing.T) {
	in := fixture(t)
	s := connect(t, in, "observe")
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pane": 7}, "pane: got number, want string"},
		{map[string]any{"pane": "%0", "level": "full"}, "arguments: additional properties 'level' not allowed"},
		{map[string]any{"pane": "%0", "max_bytes": -5}, "max_bytes: minimum: got -5, want 1"},
		{map[string]any{"pane": "%0", "start": "x"}, "start: got string, want integer"},
	} {
		msg := s.refused("pane_capture", tc.args)
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "(pane_capture takes: ") || !strings.Contains(msg, "max_bytes, pane") || strings.Contains(msg, "&{") {
			t.Errorf("%v: %q, want %q and the argument list", tc.args, msg, tc.want)
		}
	}
	if msg := s.refused("session_status", map[string]any{"x": 1}); !strings.Contains(msg, "(session_status takes no arguments)") {
		t.Errorf("session_status with an argument: %q", msg)
	}
	huge := strings.Repeat("k", 1<<20)
	if msg := s.refused("pane_list", map[string]any{huge: 1}); len(msg) > 400 || !strings.Contains(msg, "additional properties") {
		t.Errorf("a megabyte argument name: %d bytes back: %.200q", len(msg), msg)
	}
}

// badUnicode are the bytes, spliced raw into a JSON string, that are not
// text: a stray byte, an overlong NUL, a surrogate encoded as UTF-8, a cut
// sequence, and lone surrogate escapes.
var badUnicode = []string{"\xff", "\xc0\x80", "\xed\xa0\x80", "\xe2\x9c", `\ud800`, `\udc00`, `\ud800\u0041`, `\ud83d`}

// TestInvalidUnicodeInEveryArgument sends each bad sequence in every string
// argument of every observe and assist tool, over raw stdio: each call gets
// a JSON-RPC error or a tool error, the server keeps serving, nothing runs
// (canaries) and the card repository is unchanged. A valid surrogate pair
// still works.
func TestInvalidUnicodeInEveryArgument(t *testing.T) {
	in := fixture(t)
	st := studentOf(t, in)
	sen := newSentinels(t, in)
	card := in.Resolved.CardPath
	shell := st.pane("shell")
	st.waitPrompt(shell)
	before := takeSnapshot(t, card)
	shellBefore := st.capture(shell)
	bufsBefore := st.buffers()
	const mark = "@@BAD@@"
	for _, level := range []string{"observe", "assist"} {
		t.Run(level, func(t *testing.T) {
			r := startRaw(t, in, level)
			r.t = t
			r.initialize()
			r.sendJSON(map[string]any{"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
			var list struct {
				Result struct {
					Tools []struct {
						Name        string `json:"name"`
						InputSchema struct {
							Properties map[string]struct {
								Type string `json:"type"`
							} `json:"properties"`
						} `json:"inputSchema"`
					} `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(mustJSON(r.reply("list", 20*time.Second))), &list); err != nil || len(list.Result.Tools) == 0 {
				t.Fatalf("tools/list: %v", err)
			}
			base := baseArgs(shell)
			calls := 0
			for _, tool := range list.Result.Tools {
				args, ok := base[tool.Name]
				if !ok {
					t.Fatalf("tool %s has no base arguments: add it to baseArgs", tool.Name)
				}
				for p, sch := range tool.InputSchema.Properties {
					var values []string // JSON text of the argument, mark where the bad bytes go
					switch sch.Type {
					case "string":
						v, _ := args[p].(string)
						values = []string{mustJSON(v + mark)}
					case "array":
						values = []string{`["x` + mark + `"]`, `["ok", "` + mark + `"]`}
					default:
						continue
					}
					for _, vt := range values {
						for _, bad := range badUnicode {
							calls++
							id := fmt.Sprintf("%s-%s-%d", tool.Name, p, calls)
							a := map[string]any{}
							for k, v := range args {
								a[k] = v
							}
							a[p] = json.RawMessage(`"PLACEHOLDER"`)
							msg := mustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
								"params": map[string]any{"name": tool.Name, "arguments": a}})
							line := strings.Replace(msg, `"PLACEHOLDER"`, strings.Replace(vt, mark, bad, 1), 1)
							r.send([]byte(line + "\n"))
							m := r.reply(id, 30*time.Second)
							res, _ := m["result"].(map[string]any)
							if code, _ := errorCode(m); code == 0 && (res == nil || res["isError"] != true) {
								t.Errorf("%s %s=%q: accepted: %s", tool.Name, p, strings.Replace(vt, mark, bad, 1), clip(mustJSON(m), 300))
							}
							sen.check(t, id, mustJSON(m))
						}
					}
				}
				if d := before.diff(takeSnapshot(t, card)); d != "" {
					t.Fatalf("after %s: the card repository changed:\n%s", tool.Name, d)
				}
				r.alive("alive-"+tool.Name, in.Name)
			}
			// A surrogate pair is one character, not an error.
			r.send([]byte(`{"jsonrpc":"2.0","id":"pair","method":"tools/call","params":{"name":"pane_wait","arguments":{"pane":"` + shell +
				`","pattern":"\ud83d\ude00","timeout_ms":50}}}` + "\n"))
			if m := r.reply("pair", 20*time.Second); m["result"] == nil || get(m, "result", "isError") == true {
				t.Errorf("a valid surrogate pair was refused: %s", clip(mustJSON(m), 300))
			}
			t.Logf("%s: %d calls with invalid Unicode", level, calls)
		})
	}
	if now := st.shellBarrier(shell); !unchanged(shellBefore, now) {
		t.Fatalf("the shell pane changed:\n%s", lastLines(now, 10))
	}
	if got := st.buffers(); strings.Join(got, "\n") != strings.Join(bufsBefore, "\n") {
		t.Fatalf("Neovim's buffers changed:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(bufsBefore, "\n"))
	}
	sen.check(t, "end", "")
}
