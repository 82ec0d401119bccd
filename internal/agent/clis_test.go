package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/stem-edu/stem/internal/agent/agentcli"
	"github.com/stem-edu/stem/internal/agent/agentstore"
	"github.com/stem-edu/stem/internal/agent/runspec"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/mcpserver"
	"github.com/stem-edu/stem/internal/registry"
	"github.com/stem-edu/stem/internal/sockets"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/verify"
	"github.com/stem-edu/stem/internal/workspace"
	"github.com/stem-edu/stem/internal/xdg"
)

// These tests run the real agent CLIs (installed by
// scripts/install-agent-clis.sh) on exactly what the adapters produce:
// each CLI must accept the configuration, list the stem server in its own
// `mcp list`, and, run once against a local stand-in for its model API,
// send a first request that carries stem's context and exactly the stem
// tools of the agent's level (proof that it started stem-mcp from the
// configuration, did the MCP handshake and listed the tools). No model
// access is needed.

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// stemMCPBin is $STEM_MCP_BIN (make test sets it) or a fresh static build.
func stemMCPBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("STEM_MCP_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return filepath.Join(testenv.Binary(t, "stem-mcp-cli", "./cmd/stem-mcp"), "stem-mcp-cli")
}

// cliRig is a private account for one CLI: its HOME, stem's directories,
// and an agent prepared by Env.Prepare for a (not running) instance: the
// CLIs only start stem-mcp and list its tools.
type cliRig struct {
	home string
	env  *Env
	p    *Prepared
}

func newCLIRig(t *testing.T, provider string, level mcpserver.Level, edit ...func(*workspace.Resolved)) *cliRig {
	t.Helper()
	// Gemini ignores settings under world-writable directories (/tmp), so
	// the account lives in the repository's .cache.
	cache := filepath.Join(repoRoot(), ".cache")
	os.MkdirAll(cache, 0o755)
	// Short names: the agent socket under base must fit the 100-byte limit
	// even when the repository sits deep (CI checks it out under /check).
	base, err := os.MkdirTemp(cache, "ac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o700)
	if err := agentcli.CheckSettingsDir(base); err != nil {
		t.Fatalf("the repository lies under a world-writable directory: %v", err)
	}
	dirs := xdg.Dirs{Runtime: filepath.Join(base, "r"), State: filepath.Join(base, "state"), Config: filepath.Join(base, "config"), Home: filepath.Join(base, "home"), UID: os.Getuid()}
	tmp := filepath.Join(base, "tmp") // Gemini CLI writes its error reports there
	for _, d := range []string{dirs.Runtime, dirs.State, dirs.Config, dirs.Home, tmp} {
		os.MkdirAll(d, 0o700)
	}
	l := sockets.Layout{Runtime: dirs.Runtime}
	ps, err := agentcli.LoadProviders(dirs.Config)
	if err != nil {
		t.Fatal(err)
	}
	cli := clitest.Bin(t, provider) // first: under -short it skips before a build
	e := &Env{Dirs: dirs, Layout: l, Store: agentstore.NewStore(l, dirs.State), MCPBinary: stemMCPBin(t),
		Environ: []string{"PATH=" + filepath.Dir(cli) + ":" + os.Getenv("PATH"), "HOME=" + dirs.Home, "TMPDIR=" + tmp}, Providers: ps}
	ws, err := workspace.Open(filepath.Join(repoRoot(), "examples", "workspace"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ws.Resolve("hazard3-sim", "inf", "bss", "4", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range edit {
		f(r)
	}
	cid := strings.Repeat("c0ffee", 10) + "c0ff"
	dir, err := l.ForContainer(sockets.ThreadKey(r.Workspace), sockets.InstanceKey("hazard3-sim-inf-bss-t4"), cid)
	if err != nil {
		t.Fatal(err)
	}
	tg := verify.Target{Record: registry.Record{Instance: "hazard3-sim-inf-bss-t4", ContainerID: cid, SocketDir: dir.Path}, Dir: dir}
	p, err := e.Prepare(Request{Provider: provider, Level: level, Target: tg, Resolved: r}, agentstore.ModeHere)
	if err != nil {
		t.Fatal(err)
	}
	return &cliRig{home: dirs.Home, env: e, p: p}
}

// cmdEnv is the agent's environment plus extra variables.
func (r *cliRig) cmdEnv(extra ...string) []string {
	return append(runspec.Environ(r.env.Environ, r.p.Launch.Env), append([]string{"NO_COLOR=1", "CI=1"}, extra...)...)
}

func (r *cliRig) run(t *testing.T, argv []string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.p.Record.WorkDir
	cmd.Env = r.cmdEnv(extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", filepath.Base(argv[0]), argv[1:], err, out)
	}
	return string(out)
}

// modelStandIn records what a CLI sends to its model API and refuses it.
type modelStandIn struct {
	*httptest.Server
	reqs chan capturedRequest
}

type capturedRequest struct {
	path string
	body []byte
}

func newModelStandIn(t *testing.T) *modelStandIn {
	m := &modelStandIn{reqs: make(chan capturedRequest, 64)}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPost {
			select {
			case m.reqs <- capturedRequest{req.URL.Path, body}:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"code":400,"type":"invalid_request_error","message":"stem test stand-in","status":"INVALID_ARGUMENT"}}`)
	}))
	t.Cleanup(m.Close)
	return m
}

// firstRequest runs the CLI until it sends a request to a path matching
// pathRE whose body matches want, then stops it.
func (r *cliRig) firstRequest(t *testing.T, m *modelStandIn, argv []string, pathRE string, want func([]byte) bool, extra ...string) []byte {
	t.Helper()
	body, _ := r.firstRequestIn(t, m, argv, pathRE, want, false, "", extra...)
	return body
}

// firstRequestIn is firstRequest that also returns the CLI's output
// (stdout and stderr), with the CLI on a pseudo-terminal of its own when
// interactive (its TUI draws there).
// When outWant is set, the CLI's output must also hold it before the CLI
// is stopped: a CLI may print a line after sending the request it stands
// for, and its output reaches the buffer through a copy of its own.
func (r *cliRig) firstRequestIn(t *testing.T, m *modelStandIn, argv []string, pathRE string, want func([]byte) bool, interactive bool, outWant string, extra ...string) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.p.Record.WorkDir
	cmd.Env = r.cmdEnv(extra...)
	out := lockedBuffer{wrote: make(chan struct{}, 1)}
	copied := make(chan struct{})
	if interactive {
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		go func() { defer close(copied); io.Copy(&out, f) }()
	} else {
		close(copied)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	// The whole group (pty.Start makes a session, Setpgid a group): a CLI
	// that relaunched itself (Gemini CLI) would otherwise go on writing
	// into the rig's HOME after the test removed it.
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	re := regexp.MustCompile(pathRE)
	var last []byte
	for {
		select {
		case req := <-m.reqs:
			if !re.MatchString(req.path) {
				continue
			}
			last = req.body
			if want(req.body) {
				for !strings.Contains(out.String(), outWant) {
					select {
					case <-out.changed():
					case <-ctx.Done():
						t.Fatalf("%s sent its request but never printed %q; output:\n%s", filepath.Base(argv[0]), outWant, out.String())
					}
				}
				return req.body, out.String()
			}
		case <-ctx.Done():
			t.Fatalf("%s sent no matching request to %s; last body %.2000s\noutput:\n%s", filepath.Base(argv[0]), pathRE, last, out.String())
		}
	}
}

type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // a token after each write
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

// changed is ready after a write since the last receive (never, for a
// buffer made without the channel).
func (l *lockedBuffer) changed() <-chan struct{} { return l.wrote }

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stemToolsIn extracts the stem tool names a request offers the model.
func stemToolsIn(body []byte, re string) []string {
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(re).FindAllSubmatch(body, -1) {
		set[string(m[1])] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedTools(l mcpserver.Level) []string {
	names := append([]string(nil), mcpserver.ToolNames(l)...)
	sort.Strings(names)
	return names
}

func (r *cliRig) contextMark() string { return "(agent " + r.p.Record.ID + ")" }

// Codex at observe (read-only sandbox) and full: `codex mcp list` reads
// the server from stem's -c options, and the first request offers the
// model exactly the level's stem tools (none dropped, none rejected).
func TestCodexTakesTheAdapterConfiguration(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, level := range []mcpserver.Level{mcpserver.Observe, mcpserver.Full} {
		t.Run(level.String(), func(t *testing.T) { testCodex(t, level) })
	}
}

func testCodex(t *testing.T, level mcpserver.Level) {
	r := newCLIRig(t, "codex", level)
	argv := r.p.Launch.Argv
	if sandboxed := slices.Contains(argv, "--sandbox"); sandboxed != (level == mcpserver.Observe) {
		t.Fatalf("%s: codex's argv %q (--sandbox read-only only below assist)", level, argv)
	}
	// The -c options precede everything else of stem's.
	end := 1
	for end+1 < len(argv) && argv[end] == "-c" {
		end += 2
	}
	opts := argv[1:end]
	var got []struct {
		Name      string `json:"name"`
		Enabled   bool   `json:"enabled"`
		Transport struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"transport"`
		ToolTimeout float64 `json:"tool_timeout_sec"`
	}
	out := r.run(t, append(append([]string{argv[0]}, opts...), "mcp", "list", "--json"))
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &got); err != nil {
		t.Fatalf("codex mcp list --json: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].Name != "stem" || !got[0].Enabled {
		t.Fatalf("codex mcp list: %s", out)
	}
	srv := r.p.Record.MCP
	if got[0].Transport.Command != srv.Command || !slices.Equal(got[0].Transport.Args, srv.Args) || got[0].Transport.Env["XDG_RUNTIME_DIR"] != srv.Env["XDG_RUNTIME_DIR"] || got[0].ToolTimeout != 660 {
		t.Fatalf("codex read %+v, want %v", got[0], srv)
	}
	table := r.run(t, append(append([]string{argv[0]}, opts...), "mcp", "list"))
	if !regexp.MustCompile(`(?m)^stem\s+` + regexp.QuoteMeta(srv.Command) + `\s+serve --level ` + level.String() + ` --instance hazard3-sim-inf-bss-t4 --agent [0-9a-f]{6}\s`).MatchString(table) {
		t.Fatalf("codex mcp list:\n%s", table)
	}

	// The whole command line, as launched (read-only sandbox included),
	// with a model provider that points at the stand-in.
	m := newModelStandIn(t)
	run := append(append([]string{}, argv...), "-m", "gpt-5",
		"-c", "model_provider=stemtest",
		"-c", `model_providers.stemtest={name="stemtest", base_url="`+m.URL+`/v1", env_key="STEMTEST_KEY", wire_api="responses"}`,
		"exec", "--skip-git-repo-check", "hello")
	body := r.firstRequest(t, m, run, `/v1/responses$`, func(b []byte) bool { return bytes.Contains(b, []byte(`"mcp__stem"`)) }, "STEMTEST_KEY=dummy")
	var req struct {
		Tools []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var names []string
	for _, tl := range req.Tools {
		if tl.Name == "mcp__stem" {
			for _, st := range tl.Tools {
				names = append(names, st.Name)
			}
		}
	}
	sort.Strings(names)
	if want := sortedTools(level); !slices.Equal(names, want) {
		t.Fatalf("codex offered the model stem tools %v, want the %s set %v", names, level, want)
	}
	if !bytes.Contains(body, []byte(r.contextMark())) {
		t.Fatalf("the developer instructions (stem's context) are not in codex's request")
	}
}

// Claude at assist and observe: the command line as launched, in print mode
// with stream-json output against the stand-in. Its init message says what
// it made of the adapter's own --mcp-config file (the stem server,
// connected: Claude started stem-mcp from it and did the handshake; `claude
// mcp list` ignores --mcp-config) and of --permission-mode (plan at
// observe); its first request offers the level's stem tools and carries the
// context from --append-system-prompt-file.
func TestClaudeTakesTheAdapterConfiguration(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, tc := range []struct {
		level mcpserver.Level
		mode  string
	}{{mcpserver.Full, "default"}, {mcpserver.Assist, "default"}, {mcpserver.Observe, "plan"}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			r := newCLIRig(t, "claude", tc.level)
			argv := r.p.Launch.Argv
			if slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, r.contextMark()) }) {
				t.Fatalf("the context is in claude's argv: %q", argv)
			}
			m := newModelStandIn(t)
			run := append(append([]string{}, argv...), "-p", "--output-format", "stream-json", "--verbose", "hello")
			var init struct {
				Subtype    string `json:"subtype"`
				MCPServers []struct {
					Name   string `json:"name"`
					Status string `json:"status"`
				} `json:"mcp_servers"`
				PermissionMode string `json:"permissionMode"`
			}
			body, out := r.firstRequestIn(t, m, run, `/v1/messages$`, func(b []byte) bool { return bytes.Contains(b, []byte("mcp__stem__")) }, false,
				`"subtype":"init"`, "ANTHROPIC_API_KEY=sk-stem-test", "ANTHROPIC_BASE_URL="+m.URL)
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, `"subtype":"init"`) {
					json.Unmarshal([]byte(line), &init)
					break
				}
			}
			if len(init.MCPServers) != 1 || init.MCPServers[0].Name != "stem" || init.MCPServers[0].Status != "connected" || init.PermissionMode != tc.mode {
				t.Fatalf("claude's init message: %+v, want the stem server connected and permission mode %s\n%.3000s", init, tc.mode, out)
			}
			if got, want := stemToolsIn(body, `mcp__stem__([a-z_]+)`), sortedTools(tc.level); !slices.Equal(got, want) {
				t.Fatalf("claude offered the model stem tools %v, want the %s set %v", got, tc.level, want)
			}
			var req struct {
				System json.RawMessage `json:"system"`
			}
			json.Unmarshal(body, &req)
			if !bytes.Contains(req.System, []byte(r.contextMark())) {
				t.Fatalf("stem's context is not in claude's system prompt: %.3000s", req.System)
			}
		})
	}
}

// Gemini at assist and observe: `gemini mcp list` connects to the server of
// the adapter's settings file, and the command line as launched, headless
// against the stand-in, sends a first request with the level's stem tools
// and the context. At assist the test adds yolo (headless mode offers only
// tools that need no confirmation); at observe it runs the adapter's
// --approval-mode plan as is: the request is in Plan Mode (no fallback to
// the default mode) and still offers the observe tools, all read-only.
func TestGeminiTakesTheAdapterConfiguration(t *testing.T) {
	t.Parallel() // its own directories and model stand-in
	for _, level := range []mcpserver.Level{mcpserver.Full, mcpserver.Assist, mcpserver.Observe} {
		t.Run(level.String(), func(t *testing.T) { testGemini(t, level) })
	}
}

func testGemini(t *testing.T, level mcpserver.Level) {
	r := newCLIRig(t, "gemini", level)
	argv := r.p.Launch.Argv
	trust := "GEMINI_CLI_TRUST_WORKSPACE=true"
	out := r.run(t, []string{argv[0], "mcp", "list"}, trust)
	line := "stem: " + r.p.Record.MCP.Command + " " + strings.Join(r.p.Record.MCP.Args, " ") + " (stdio) - Connected"
	if !strings.Contains(out, line) {
		t.Fatalf("gemini mcp list:\n%s\nwant %q", out, line)
	}
	// Without the settings file gemini knows no stem server: the file is
	// what brought it.
	bare := exec.Command(argv[0], "mcp", "list")
	bare.Dir, bare.Env = r.p.Record.WorkDir, append(r.env.Environ, trust)
	if b, _ := bare.CombinedOutput(); strings.Contains(string(b), "stem:") {
		t.Fatalf("gemini lists stem without stem's settings:\n%s", b)
	}

	os.MkdirAll(filepath.Join(r.home, ".gemini"), 0o700)
	os.WriteFile(filepath.Join(r.home, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600)
	m := newModelStandIn(t)
	run := append(append([]string{}, argv...), "-m", "gemini-2.5-flash")
	interactive := level == mcpserver.Observe
	if interactive {
		// Plan mode offers MCP tools (read-only ones, each call asked
		// for) only in an interactive session: the agent's window is one.
		if !containsSeq(argv, "--approval-mode", "plan") {
			t.Fatalf("observe: gemini's argv %q lacks --approval-mode plan", argv)
		}
		run = append(run, "-i", "hello")
	} else {
		run = append(run, "--approval-mode", "yolo", "-p", "hello")
	}
	body, output := r.firstRequestIn(t, m, run, `:streamGenerateContent$|:generateContent$`, func(b []byte) bool { return bytes.Contains(b, []byte("mcp_stem_")) }, interactive, "",
		"GEMINI_API_KEY=stem-test", "GOOGLE_GEMINI_BASE_URL="+m.URL, trust)
	if got, want := stemToolsIn(body, `"mcp_stem_([a-z_]+)"`), sortedTools(level); !slices.Equal(got, want) {
		t.Fatalf("gemini offered the model stem tools %v, want the %s set %v", got, level, want)
	}
	ctxFile := filepath.Join(r.p.Record.Dir, agentcli.GeminiContextDir, "GEMINI.md")
	if !bytes.Contains(body, []byte("Context from: "+ctxFile)) || !bytes.Contains(body, []byte(r.contextMark())) {
		t.Fatalf("stem's context (%s) is not in gemini's request: %.3000s", ctxFile, body)
	}
	if plan := bytes.Contains(body, []byte("You are operating in **Plan Mode**")); plan != (level == mcpserver.Observe) {
		t.Fatalf("%s: gemini's request in Plan Mode: %v\n%.3000s", level, plan, output)
	}
}

func containsSeq(a []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(a); i++ {
		if slices.Equal(a[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}
