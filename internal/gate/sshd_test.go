package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/audit"
	accesscmd "github.com/stem-edu/stem/internal/cmd/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/levels"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// student is the student's side: an instance, the sshd in front of the
// account, and stemctl's access commands.
type student struct {
	srv  *sshdtest.Server
	inst *testenv.Instance
	bin  string
	f    *cmdutil.Factory
	keys string // directory of client keys
	// clientOpts are extra ssh options for rawSession (benchmarks).
	clientOpts []string
}

// newStudent starts the fixture; sshdConfig lines go into sshd_config.
func newStudent(t testing.TB, sshdConfig ...string) *student {
	t.Helper()
	testenv.Require(t, "sshd", "ssh")
	s := &student{bin: sshdtest.StemMCP(t), srv: sshdtest.Start(t, sshdConfig...), keys: t.TempDir()}
	s.inst = testenv.New(t, testenv.Options{})
	vars := map[string]string{}
	for _, kv := range s.inst.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	ios, _, _, _ := iostreams.Test()
	s.f = &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return vars[k] },
		Dirs:      func() (xdg.Dirs, error) { return s.inst.Dirs, nil },
		MCPBinary: func() (string, error) { return s.bin, nil },
		Audit:     func() (*audit.Log, error) { return audit.Open(s.inst.Dirs.State) },
	}
	return s
}

// grant runs `stemctl access grant` for a new key and returns both.
func (s *student) grant(t testing.TB, name, level string, extra ...string) (sshdtest.Key, access.Grant) {
	t.Helper()
	key := sshdtest.NewKey(t, s.keys, name)
	out := s.access(t, append([]string{"grant", "--name", name, "--key", key.Private + ".pub", "--level", level, "--json"}, extra...)...)
	var g access.Grant
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("grant --json: %v\n%s", err, out)
	}
	return key, g
}

func (s *student) access(t testing.TB, args ...string) string {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	f := *s.f
	f.IOStreams = ios
	cmd := accesscmd.NewCmdAccess(&f)
	cmd.SetArgs(append(args, "--authorized-keys", s.srv.AuthorizedKeys))
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("stemctl access %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// shellPane is the tmux pane id of the fixture's shell window.
func (s *student) shellPane(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(s.inst.Tmux(t, "list-panes", "-t", "stem:shell", "-F", "#{pane_id}"))
}

func (s *student) auditLog(t *testing.T) *audit.Log {
	t.Helper()
	log, err := audit.Open(s.inst.Dirs.State)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// mcpClient connects an MCP client through ssh with key.
func (s *student) mcpClient(t testing.TB, ctx context.Context, key string, remote ...string) (*client.Client, *mcp.InitializeResult, error) {
	tr := transport.NewStdioWithOptions("ssh", nil, s.srv.Args(key, nil, remote...), transport.WithCommandStderrWriter(io.Discard))
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "stem-sshd-test", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, res, nil
}

// levelTools asks the real binary which tools a level has.
func (s *student) levelTools(t *testing.T, level string) []string {
	t.Helper()
	out, err := exec.Command(s.bin, "tools", "--level", level, "--json").Output()
	if err != nil {
		t.Fatalf("stem-mcp tools --level %s: %v", level, err)
	}
	var names []string
	if err := json.Unmarshal(out, &names); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	// The binary and the levels table (which mcpserver's tests hold to a
	// hand-written list) must agree, so this is not the binary checked
	// against itself.
	lv, err := levels.Parse(level)
	if err != nil {
		t.Fatal(err)
	}
	table := slices.Clone(levels.ToolNames(lv))
	slices.Sort(table)
	if !slices.Equal(names, table) {
		t.Fatalf("stem-mcp tools --level %s = %v, the levels table says %v", level, names, table)
	}
	return names
}

func status(t *testing.T, r sshdtest.Result) gate.Status {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("status: exit %d\nstderr: %s\nstdout: %s", r.Code, r.Stderr, r.Stdout)
	}
	var st gate.Status
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, r.Stdout)
	}
	return st
}

func TestSSHGate(t *testing.T) {
	s := newStudent(t)
	observeKey, observe := s.grant(t, "observer", "observe", "--instance", s.inst.Name)
	fullKey, full := s.grant(t, "teacher", "full")
	assistKey, assist := s.grant(t, "helper", "assist", "--instance", s.inst.Name)

	// A control key: the same forced command without `restrict`. It shows
	// that the refusals below come from the grant's line (and that the
	// checks could see the difference), not from this sshd's settings.
	control := sshdtest.NewKey(t, s.keys, "control")
	af, err := os.OpenFile(s.srv.AuthorizedKeys, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(af, "command=\"%s gate --grant %s --config-dir %s\" %s\n", s.bin, observe.ID, s.inst.Dirs.Config, control.PublicLine)
	af.Close()

	t.Run("mcp over ssh at the grant's level", func(t *testing.T) {
		for _, tc := range []struct {
			key   sshdtest.Key
			g     access.Grant
			level string
		}{{observeKey, observe, "observe"}, {assistKey, assist, "assist"}, {fullKey, full, "full"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			c, res, err := s.mcpClient(t, ctx, tc.key.Private, "mcp", s.inst.Name)
			if err != nil {
				cancel()
				t.Fatalf("%s: initialize over ssh: %v\nsshd log:\n%s", tc.level, err, s.srv.Log())
			}
			if res.ServerInfo.Name == "" {
				t.Errorf("%s: initialize reply without server info: %+v", tc.level, res)
			}
			tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			// A session the gate serves adds gate_status to the level's tools.
			want := append(slices.Clone(s.levelTools(t, tc.level)), "gate_status")
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("%s: tools over ssh\n got %v\nwant %v", tc.level, names, want)
			}
			call := mcp.CallToolRequest{}
			call.Params.Name = "pane_capture"
			call.Params.Arguments = map[string]any{"pane": s.shellPane(t)}
			r, err := c.CallTool(ctx, call)
			if err != nil || r.IsError {
				t.Fatalf("%s: pane_capture: %v %+v", tc.level, err, r)
			}
			if text, _ := json.Marshal(r.Content); !strings.Contains(string(text), "student$") {
				t.Errorf("%s: pane_capture of the shell pane lacks its prompt: %s", tc.level, text)
			}
			call = mcp.CallToolRequest{}
			call.Params.Name = "gate_status"
			r, err = c.CallTool(ctx, call)
			var st gate.Status
			if err != nil || r.IsError || json.Unmarshal([]byte(r.Content[0].(mcp.TextContent).Text), &st) != nil ||
				st.Level != tc.level || len(st.Instances) == 0 || !st.Instances[0].Answers {
				t.Errorf("%s: gate_status over the session: %v %+v", tc.level, err, r)
			}
			c.Close()
			cancel()
		}
		if !slices.Contains(s.levelTools(t, "full"), "nvim_command") || slices.Contains(s.levelTools(t, "assist"), "nvim_command") ||
			!slices.Contains(s.levelTools(t, "assist"), "nvim_buffer_edit") || slices.Contains(s.levelTools(t, "observe"), "nvim_buffer_edit") {
			t.Fatal("the levels' tool lists do not differ as expected; the comparison above proves nothing")
		}
		// Every session is audited with who, from where, what and when.
		deadline := time.Now().Add(5 * time.Second)
		for {
			starts, err := s.auditLog(t).Read(audit.Filter{Event: audit.SessionStart})
			if err != nil {
				t.Fatal(err)
			}
			var got []audit.Entry
			for _, e := range starts {
				if e.Grant == observe.Label() || e.Grant == assist.Label() || e.Grant == full.Label() {
					got = append(got, e)
				}
			}
			if len(got) >= 3 {
				for _, e := range got {
					g := observe
					switch e.Grant {
					case full.Label():
						g = full
					case assist.Label():
						g = assist
					}
					if e.KeyFP != g.KeyFP || e.Level != g.Level || e.Instance != s.inst.Name || e.ContainerID != s.inst.Record.ContainerID ||
						!strings.HasPrefix(e.Client, "127.0.0.1:") || e.Time.IsZero() || e.Account == "" {
						t.Errorf("session audit entry incomplete: %+v", e)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no session_start entries for the grants: %+v", starts)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("status and list", func(t *testing.T) {
		st := status(t, s.srv.Run(t, observeKey.Private, nil, "status"))
		if st.Level != "observe" || st.Grant != "observer" || len(st.Instances) != 1 || st.Instances[0].Instance != s.inst.Name || !st.Instances[0].Answers {
			t.Fatalf("status = %+v", st)
		}
		r := s.srv.Run(t, observeKey.Private, nil, "list")
		if r.Code != 0 || r.Stdout != s.inst.Name+"\n" {
			t.Fatalf("list: %+v", r)
		}
	})

	t.Run("no pty", func(t *testing.T) {
		// sshd refuses the pty; ssh -tt then gives up (exit 255). Should a
		// client go on without one, the gate must still have no tty.
		r := s.srv.Run(t, observeKey.Private, []string{"-tt"}, "status")
		if !strings.Contains(r.Stderr, "PTY allocation request failed") {
			t.Errorf("ssh -tt was not refused a pty: %+v", r)
		}
		if r.Code == 0 && status(t, r).Session.TTY {
			t.Error("the gate ran with a tty")
		}
		if st := status(t, s.srv.Run(t, control.Private, []string{"-tt"}, "status")); !st.Session.TTY {
			t.Error("control key got no tty either: the check cannot see a tty")
		}
	})

	t.Run("agent forwarding refused", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "agent.sock")
		agent := exec.Command("ssh-agent", "-D", "-a", sock)
		if err := agent.Start(); err != nil {
			t.Fatalf("ssh-agent: %v", err)
		}
		t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
		waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil })
		fwd := []string{"-o", "IdentityAgent=" + sock, "-o", "ForwardAgent=yes"}
		if st := status(t, s.srv.Run(t, observeKey.Private, fwd, "status")); st.Session.AgentForwarded {
			t.Error("agent forwarded through a restricted key")
		}
		if st := status(t, s.srv.Run(t, control.Private, fwd, "status")); !st.Session.AgentForwarded {
			t.Error("control key got no agent either: the check cannot see forwarding")
		}
	})

	t.Run("remote forwarding refused", func(t *testing.T) {
		pre := []string{"-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:9"}
		if r := s.srv.Run(t, observeKey.Private, pre, "status"); r.Code == 0 || !strings.Contains(r.Stderr, "forwarding failed") {
			t.Errorf("-R through a restricted key: %+v", r)
		}
		if r := s.srv.Run(t, control.Private, pre, "status"); r.Code != 0 {
			t.Errorf("control -R failed, the check cannot tell: %+v", r)
		}
	})

	t.Run("local forwarding refused", func(t *testing.T) {
		if n := forwardLocal(t, s.srv, observeKey.Private); n != 0 {
			t.Errorf("-L through a restricted key reached the target (%d connections)", n)
		}
		if n := forwardLocal(t, s.srv, control.Private); n == 0 {
			t.Error("control -L reached nothing either: the check cannot see forwarding")
		}
	})

	t.Run("refused commands are audited", func(t *testing.T) {
		log := s.auditLog(t)
		for _, tc := range []struct {
			key    string
			remote []string
			want   string
		}{
			{observeKey.Private, []string{"bash"}, `"bash" is not a verb`},
			{observeKey.Private, []string{"mcp; id"}, `character ";"`},
			{observeKey.Private, []string{"mcp", ";", "id"}, `character ";"`},
			{observeKey.Private, []string{"mcp ../x"}, `character "/"`},
			{observeKey.Private, []string{"mcp", "native-amd64-demo-hello-t9"}, "] refused: instance \"native-amd64-demo-hello-t9\" is not in grant observer"},
			{observeKey.Private, []string{"mcp $(id)"}, `character "$"`},
			{observeKey.Private, []string{"mcp --level full"}, "at most one instance"},
			{fullKey.Private, []string{"cat /etc/passwd"}, `character "/"`},
			{fullKey.Private, nil, "no command given"},
		} {
			before, _ := log.Read(audit.Filter{Event: audit.Refused})
			r := s.srv.Run(t, tc.key, nil, tc.remote...)
			code := "[bad_input]"
			if strings.Contains(tc.want, "not in grant") {
				code = "[not_granted]"
			}
			if r.Code != gate.ExitRefused || r.Stdout != "" || !strings.HasPrefix(r.Stderr, "stem-mcp gate: "+code+" refused: ") ||
				strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("ssh %q: code %d stdout %q stderr %q (want one refusal line with %q)", tc.remote, r.Code, r.Stdout, r.Stderr, tc.want)
				continue
			}
			after, _ := log.Read(audit.Filter{Event: audit.Refused})
			if len(after) != len(before)+1 {
				t.Errorf("ssh %q: not audited", tc.remote)
				continue
			}
			e := after[len(after)-1]
			if !strings.Contains(e.Detail, strconv.Quote(strings.Join(tc.remote, " "))) || !strings.HasPrefix(e.Client, "127.0.0.1:") || e.KeyFP == "" {
				t.Errorf("ssh %q: audit entry %+v", tc.remote, e)
			}
		}
		// sftp and scp go through the forced command too.
		if r := s.srv.Run(t, fullKey.Private, []string{"-s"}, "sftp"); r.Code != gate.ExitRefused {
			t.Errorf("sftp subsystem: %+v", r)
		}
	})

	t.Run("client environment cannot change the level", func(t *testing.T) {
		pre := []string{"-o", "SetEnv=STEM_CONFIG_DIR=/nonexistent XDG_CONFIG_HOME=/nonexistent STEM_STATE_DIR=/nonexistent LC_ALL=C"}
		st := status(t, s.srv.Run(t, observeKey.Private, pre, "status"))
		if st.Level != "observe" || len(st.Instances) != 1 {
			t.Fatalf("status with smuggled env = %+v", st)
		}
	})

	t.Run("revoked key", func(t *testing.T) {
		key, g := s.grant(t, "revokee", "observe")
		status(t, s.srv.Run(t, key.Private, nil, "status"))
		// An open session ends when the grant is revoked.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, _, err := s.mcpClient(t, ctx, key.Private, "mcp", s.inst.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s.access(t, "revoke", "revokee")
		if r := s.srv.Run(t, key.Private, nil, "status"); r.Code != 255 || !strings.Contains(r.Stderr, "Permission denied") {
			t.Errorf("revoked key still logs in: %+v", r)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the open session still answers 15s after the revoke")
			}
			time.Sleep(200 * time.Millisecond)
		}
		ends, _ := s.auditLog(t).Read(audit.Filter{Event: audit.SessionEnd})
		found := false
		for _, e := range ends {
			found = found || (e.Grant == g.Label() && e.Result == "refused")
		}
		if !found {
			t.Error("the ended session is not in the audit log")
		}
	})

	t.Run("expired grant", func(t *testing.T) {
		// Granted an hour ago for thirty minutes: sshd's expiry-time refuses
		// the key before the gate runs.
		store, err := access.OpenStore(s.inst.Dirs.Config)
		if err != nil {
			t.Fatal(err)
		}
		m := &access.Manager{Store: store, AuthorizedKeys: s.srv.AuthorizedKeys, MCPBinary: s.bin, ConfigDirArg: s.inst.Dirs.Config,
			Now: func() time.Time { return time.Now().Add(-time.Hour) }}
		key := sshdtest.NewKey(t, s.keys, "expired")
		if _, err := m.Grant(context.Background(), access.GrantRequest{Name: "expired", PublicKey: key.PublicLine, Level: "full", Expires: time.Now().Add(-30 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if r := s.srv.Run(t, key.Private, nil, "status"); r.Code != 255 || !strings.Contains(r.Stderr, "Permission denied") {
			t.Errorf("expired key logs in: %+v", r)
		}
		// The same kind of line with a future expiry works: sshd reads
		// the expiry-time we write (UTC, Z suffix) as intended.
		soon, _ := s.grant(t, "soon", "observe", "--expires", "1h")
		if st := status(t, s.srv.Run(t, soon.Private, nil, "status")); st.Expires == nil {
			t.Errorf("status of an expiring grant has no expiry: %+v", st)
		}
	})

	t.Run("access check is clean", func(t *testing.T) {
		// Only the control line (a stem line without restrict, for another
		// key) is reported.
		ios, _, out, _ := iostreams.Test()
		f := *s.f
		f.IOStreams = ios
		cmd := accesscmd.NewCmdAccess(&f)
		cmd.SetArgs([]string{"check", "--authorized-keys", s.srv.AuthorizedKeys})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if err == nil || len(lines) != 2 || !strings.Contains(out.String(), "is not the granted key") || !strings.Contains(out.String(), "grant expired: expired") || strings.Contains(out.String(), "soon") {
			t.Fatalf("check: %v\n%s", err, out.String())
		}
	})
}

// forwardLocal runs `ssh -N -L` with key, connects through the forward
// once and returns how many connections reached the target.
func forwardLocal(t *testing.T, srv *sshdtest.Server, key string) int {
	t.Helper()
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	var mu sync.Mutex
	reached := 0
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			reached++
			mu.Unlock()
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	// ssh listens on a Unix socket in a private directory: a TCP port
	// picked here and closed could be taken by anyone before ssh binds it.
	dir, err := os.MkdirTemp("/tmp", "sf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "l.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fwd := local + ":" + target.Addr().String()
	cmd := exec.CommandContext(ctx, "ssh", srv.Args(key, []string{"-N", "-L", fwd})...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var c net.Conn
	waitFor(t, func() bool {
		c, err = net.Dial("unix", local)
		return err == nil
	})
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	c.Read(buf) // "x" through a working forward; EOF when refused
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	return reached
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
