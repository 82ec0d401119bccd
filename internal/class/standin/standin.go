// Package standin is a stand-in for many students' gates on one loopback
// port, for benchmarks and tests of the teacher's side at a scale one
// machine cannot host as real accounts (each real student is a Unix
// account with rootless Podman and a container).
//
// It speaks the same protocol as a student's sshd and gate: SSH with the
// teacher's key, the exec request carrying the gate's verb (`status`,
// `mcp INSTANCE`), and on `mcp` an MCP session on the channel with the
// gate's gate_status and session_events tools. Every SSH user name is a
// student with one observe-level grant and one running instance; one whose
// name starts with "failing" has failed three builds and crashed. Each
// status answer appends a line to that student's log and syncs it, as
// the real gate audits every status. A user named "hostile-MODE..." gets
// a hostile gate instead (hostile.go). It is not a security boundary and
// checks nothing but the teacher's key.
package standin

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/crypto/ssh"

	"github.com/stem-edu/stem/internal/gate/gatestatus"
	"github.com/stem-edu/stem/internal/levels"
)

// Instance is every stand-in student's one instance.
const Instance = "native-amd64-demo-hello-t1"

// Server is the stand-in gates' sshd.
type Server struct {
	Port int
	// KnownHosts is a known_hosts line for 127.0.0.1:Port.
	KnownHosts string

	// Verbs counts the exec requests by verb ("status", "mcp"); Calls the
	// MCP tool calls by tool.
	Verbs, Calls sync.Map // string -> *atomic.Int64

	l      net.Listener
	cfg    *ssh.ServerConfig
	dir    string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens on a loopback port for the teacher's key (an
// authorized_keys line); dir holds the students' logs. Close stops it.
func Start(teacherKey, dir string) (*Server, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(teacherKey))
	if err != nil {
		return nil, fmt.Errorf("the teacher's key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	want := string(pub.Marshal())
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != want {
			return nil, fmt.Errorf("unknown key")
		}
		return &ssh.Permissions{}, nil
	}}
	cfg.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Port: l.Addr().(*net.TCPAddr).Port, l: l, cfg: cfg, dir: dir}
	s.KnownHosts = fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops listening and ends every session.
func (s *Server) Close() {
	s.cancel()
	s.l.Close()
	s.wg.Wait()
}

// Count returns a counter of Verbs or Calls.
func Count(m *sync.Map, key string) int64 {
	if v, ok := m.Load(key); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func inc(m *sync.Map, key string) {
	v, _ := m.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.conn(c)
		}()
	}
}

func (s *Server) conn(c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stop()
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(sc.User(), ch, creqs)
	}
}

// session waits for the exec request and serves its verb, refusing
// terminals and shells as a restrict key does.
func (s *Server) session(user string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for r := range reqs {
		if r.Type != "exec" {
			r.Reply(false, nil)
			continue
		}
		var p struct{ Command string }
		if ssh.Unmarshal(r.Payload, &p) != nil {
			r.Reply(false, nil)
			return
		}
		r.Reply(true, nil)
		go ssh.DiscardRequests(reqs)
		code := s.verb(user, p.Command, ch)
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Code uint32 }{uint32(code)}))
		return
	}
}

func (s *Server) verb(user, cmd string, ch ssh.Channel) int {
	if m := HostileMode(user); m != "" {
		inc(&s.Verbs, "hostile")
		return Hostile(m, cmd, ch, ch)
	}
	f := strings.Fields(cmd)
	switch {
	case len(f) == 1 && f[0] == "status":
		inc(&s.Verbs, "status")
		st, err := s.status(user)
		if err != nil {
			fmt.Fprintf(ch.Stderr(), "stem-mcp gate: [internal] %v\n", err)
			return 2
		}
		json.NewEncoder(ch).Encode(st)
		return 0
	case len(f) == 2 && f[0] == "mcp" && f[1] == Instance:
		inc(&s.Verbs, "mcp")
		s.serveMCP(user, ch)
		return 0
	}
	fmt.Fprintf(ch.Stderr(), "stem-mcp gate: [bad_input] refused: %q is not a verb of this key\n", cmd)
	return 1
}

// status is the gate's status for user, recorded (and synced) in the
// user's log first.
func (s *Server) status(user string) (gatestatus.Status, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, filepath.Base(user)+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return gatestatus.Status{}, err
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s gate.status\n", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return gatestatus.Status{}, err
	}
	if err := f.Sync(); err != nil {
		return gatestatus.Status{}, err
	}
	return gatestatus.Status{Account: user, Grant: "kowalski", Level: levels.Observe.String(), Instances: []gatestatus.InstanceStatus{{
		Instance: Instance, Registered: true, ContainerID: strings.Repeat("a", 64), Profile: "native-amd64",
		Series: "demo", Card: "hello", Task: "1", Tmux: true, Nvim: true, Answers: true,
	}}}, nil
}

// failingEvents are the first session events of a student whose user
// name starts with "failing": three failed builds and a crash.
var failingEvents = `{"events":[` +
	`{"seq":1,"type":"build_failed","action":"build","exit_code":2,"time":"2026-12-03T10:00:00Z","instance":"` + Instance + `"},` +
	`{"seq":2,"type":"build_failed","action":"build","exit_code":2,"time":"2026-12-03T10:00:01Z","instance":"` + Instance + `"},` +
	`{"seq":3,"type":"test_failed","action":"test","exit_code":2,"time":"2026-12-03T10:00:02Z","instance":"` + Instance + `"},` +
	`{"seq":4,"type":"program_crashed","exit_code":139,"signal":"SIGSEGV","time":"2026-12-03T10:00:03Z","instance":"` + Instance + `"}]}`

// serveMCP serves the gate's MCP session on ch until the client goes.
func (s *Server) serveMCP(user string, ch ssh.Channel) {
	srv := server.NewMCPServer("stem-mcp standin", "1", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("gate_status", mcp.WithDescription("the gate's status")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			inc(&s.Calls, "gate_status")
			st, err := s.status(user)
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			data, _ := json.Marshal(st)
			return mcp.NewToolResultText(string(data)), nil
		})
	srv.AddTool(mcp.NewTool("session_events", mcp.WithNumber("since"), mcp.WithNumber("wait_ms")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			inc(&s.Calls, "session_events")
			if strings.HasPrefix(user, "failing") && req.GetFloat("since", 0) == 0 {
				return mcp.NewToolResultText(failingEvents), nil
			}
			select {
			case <-time.After(time.Duration(req.GetFloat("wait_ms", 0)) * time.Millisecond):
			case <-ctx.Done():
			}
			return mcp.NewToolResultText(`{"events":[]}`), nil
		})
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	ss := server.NewStdioServer(srv)
	ss.SetErrorLogger(log.New(io.Discard, "", 0)) // a client that went away is no news
	ss.Listen(ctx, io.NopCloser(ch), ch)
}
