//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

// Package podman implements engine.Engine over the Podman REST API with
// Podman's Go bindings. It is the only package in stem that imports them:
// they are large (about 110 modules), so binaries that only read the registry
// or talk to sockets, such as stem-mcp, must not depend on this package.
//
// The service is found the way the podman remote client finds it:
// CONTAINER_HOST, else the rootless socket $XDG_RUNTIME_DIR/podman/podman.sock,
// else, for root, /run/podman/podman.sock. When nothing answers, Connect can
// start `podman system service` on that socket for the user.
package podman

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containers/podman/v5/pkg/bindings"

	"github.com/stem-edu/stem/internal/engine"
)

// Defaults for Options fields left zero.
const (
	DefaultStartTimeout = 15 * time.Second
	DefaultCallTimeout  = 60 * time.Second
	// probeTimeout bounds the first dial of a unix socket. The bindings retry
	// a failed request three times with sleeps (0.6 s in all), so a dead
	// socket is detected here first.
	probeTimeout = 500 * time.Millisecond
	// ServiceLogName is the log file of a service started by Connect.
	ServiceLogName = "podman-service.log"
)

// Engine talks to one Podman service. It is safe for concurrent use.
type Engine struct {
	uri         string
	conn        context.Context // carries the bindings' connection
	client      *bindings.Connection
	callTimeout time.Duration
	service     *Service
	getenv      func(string) string
	// opts are Connect's, for starting the service again (see restarted).
	opts Options
}

var _ engine.Engine = (*Engine)(nil)

// NotRunningError says no service answers at URI; its message says how to
// start one.
type NotRunningError struct {
	URI string
	Err error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no Podman service answers at %s (%v): %s", e.URI, e.Err, startHint(e.URI))
}

func (e *NotRunningError) Unwrap() error { return e.Err }

// startHint is the command that starts a service at uri.
func startHint(uri string) string {
	path, ok := unixPath(uri)
	if !ok {
		return "start the Podman service that " + uri + " points to, or unset CONTAINER_HOST"
	}
	unit := "systemctl --user enable --now podman.socket"
	if strings.HasPrefix(path, "/run/podman/") {
		unit = "sudo systemctl enable --now podman.socket"
	}
	return fmt.Sprintf("start it with `%s`, or run `podman system service --time=0 unix://%s &`", unit, path)
}

// DefaultURI is the service URI the podman remote client would use:
// CONTAINER_HOST if set, else the rootless or the root socket.
func DefaultURI(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if h := getenv("CONTAINER_HOST"); h != "" {
		return h
	}
	if os.Geteuid() == 0 {
		return "unix:///run/podman/podman.sock"
	}
	rt := getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		rt = filepath.Join("/run/user", strconv.Itoa(os.Geteuid()))
	}
	return "unix://" + filepath.Join(rt, "podman", "podman.sock")
}

// unixPath returns the socket path of a unix:// URI.
func unixPath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "unix" {
		return "", false
	}
	// unix://run/x (two slashes) means /run/x, as in the bindings.
	p := u.Path
	if u.Host != "" {
		p = "/" + u.Host + u.Path
	}
	return p, p != ""
}

// Connect finds the service, optionally starts it, and returns an Engine.
func Connect(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	uri := opts.URI
	if uri == "" {
		uri = DefaultURI(opts.Getenv)
	}
	var started *Service
	if path, ok := unixPath(uri); ok {
		err := probe(ctx, path)
		if err != nil && opts.StartService {
			started, err = startService(ctx, opts, path)
		}
		if err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	// The bindings keep the connection as a value of the returned context.
	// Only that value is used later (see call), so its cancellation here,
	// after the initial ping, does not matter.
	conn, err := bindings.NewConnection(cctx, uri)
	if err != nil {
		return nil, ExplainError(fmt.Errorf("connect to Podman at %s: %w", uri, err))
	}
	client, err := bindings.GetClient(conn)
	if err != nil {
		return nil, fmt.Errorf("connect to Podman at %s: %w", uri, err)
	}
	opts.URI = uri
	return &Engine{uri: uri, conn: conn, client: client, callTimeout: opts.CallTimeout, service: started, getenv: opts.Getenv, opts: opts}, nil
}

// probe dials a unix socket once, so a dead or missing socket fails fast
// with NotRunningError (or a permission error ExplainError recognises).
func probe(ctx context.Context, path string) error {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return ExplainError(fmt.Errorf("connect to Podman at unix://%s: %w", path, err))
		}
		return &NotRunningError{URI: "unix://" + path, Err: err}
	}
	return c.Close()
}

// startService starts `podman system service` on path and waits until it
// answers. A lock file serialises concurrent callers, which would otherwise
// each start a service and replace one another's socket.
func startService(ctx context.Context, opts Options, path string) (*Service, error) {
	uri := "unix://" + path
	if opts.LogDir == "" {
		return nil, errors.New("start the Podman service: no log directory given")
	}
	if err := os.MkdirAll(opts.LogDir, 0o700); err != nil {
		return nil, fmt.Errorf("start the Podman service: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(opts.LogDir, "podman-service.lock"))
	if err != nil {
		return nil, fmt.Errorf("start the Podman service: %w", err)
	}
	defer unlock()
	if probe(ctx, path) == nil {
		return nil, nil // another process started it while we waited
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("start the Podman service: %w", err)
	}
	logPath := filepath.Join(opts.LogDir, ServiceLogName)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start the Podman service: %w", err)
	}
	defer logf.Close()
	podman := opts.Podman
	if podman == "" {
		podman = "podman"
	}
	fmt.Fprintf(logf, "--- %s: %s system service --time=0 %s (CONTAINERS_CONF=%q)\n",
		time.Now().Format(time.RFC3339), podman, uri, opts.Getenv("CONTAINERS_CONF"))
	// Not CommandContext: the service must outlive this call and this process.
	cmd := exec.Command(podman, "system", "service", "--time=0", uri)
	// CONTAINER_HOST (or a connection name) would make the podman CLI a
	// remote client of that very socket instead of the service.
	cmd.Env = withoutEnv(os.Environ(), "CONTAINER_HOST", "CONTAINER_CONNECTION")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Not the caller's directory (a student's card): the service outlives
	// the caller, and the conmon of an exec session writes an "oom" file
	// into the working directory it inherits when a process is OOM-killed.
	// The socket's directory lives as long as the service does (the log
	// directory need not: a removed working directory makes the runtime
	// fail to start containers).
	cmd.Dir = filepath.Dir(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, ExplainError(fmt.Errorf("start the Podman service (%s): %w", podman, err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it if it dies while we run
	svc := &Service{URI: uri, PID: cmd.Process.Pid, Log: logPath}

	deadline := time.NewTimer(opts.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("the Podman service exited at once (%v); see %s:\n%s", err, logPath, tail(logPath, 10))
		case <-deadline.C:
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the Podman service did not answer at %s within %v; see %s:\n%s", uri, opts.StartTimeout, logPath, tail(logPath, 10))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("start the Podman service: %w", ctx.Err())
		case <-tick.C:
			if probe(ctx, path) == nil {
				// The service's share of a first command's wait, for
				// whoever reads why it was slow.
				fmt.Fprintf(logf, "--- answered after %d ms\n", time.Since(began).Milliseconds())
				return svc, nil
			}
		}
	}
}

// lockFile takes an exclusive flock, polling until ctx is done.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a small log file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// URI is the service address in use.
func (e *Engine) URI() string { return e.uri }

// Service is the service Connect started, or nil if it was already running.
func (e *Engine) Service() *Service { return e.service }

// call returns a context with the caller's cancellation and values, the
// bindings' connection, and CallTimeout when the caller set no deadline.
func (e *Engine) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = withConn{Context: ctx, conn: e.conn}
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.callTimeout)
}

// withConn looks values up in the connection context first: the bindings
// find their client there, under keys of their own private type.
type withConn struct {
	context.Context
	conn context.Context
}

func (c withConn) Value(key any) any {
	if v := c.conn.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// Ping checks the service answers and returns its version. It uses /_ping,
// which costs the service nothing (/version runs conmon and the runtime).
func (e *Engine) Ping(ctx context.Context) (v string, err error) {
	defer e.explain(ctx, &err)
	ctx, cancel := e.call(ctx)
	defer cancel()
	resp, err := e.client.DoRequest(ctx, nil, http.MethodGet, "/_ping", nil, nil)
	if e.restarted(ctx, err) {
		resp, err = e.client.DoRequest(ctx, nil, http.MethodGet, "/_ping", nil, nil)
	}
	if err != nil {
		return "", fmt.Errorf("ping Podman at %s: %w", e.uri, err)
	}
	defer resp.Body.Close()
	if err := resp.Process(nil); err != nil {
		return "", fmt.Errorf("ping Podman at %s: %w", e.uri, err)
	}
	v = resp.Header.Get("Libpod-Buildversion")
	if v == "" {
		v = resp.Header.Get("Libpod-API-Version")
	}
	if v == "" {
		return "", fmt.Errorf("ping Podman at %s: the answer carries no version (is it Podman?)", e.uri)
	}
	return v, nil
}

// withoutEnv returns env minus the named variables.
func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
