// Package egress is the only way out to the network for an agent's
// sandbox: an HTTP proxy that the host runs for one agent, reachable from
// the sandbox (a container with no network of its own) only through a
// Unix socket, and allowing only the endpoints of that agent's model API.
//
// Threat model: everything in the sandbox is untrusted (the agent CLI,
// whatever a prompt injection or the student's container typed into it).
// The proxy must not let it reach the host's loopback services, the local
// network or any other host: a request is served only when its host and
// port are on the allow list, matched exactly (no suffixes, no IP forms of
// an allowed name), and the proxy itself dials only the address the rule
// names. Two forms are served, as the agent CLIs use both: CONNECT (a
// tunnel: HTTPS, and Node's proxy agent for plain HTTP too) and requests
// in absolute form (http://host:port/path). Every decision is reported to
// Options.Log.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rule allows one endpoint.
type Rule struct {
	// Host and Port are what the client asks for (the name in its URL).
	Host string
	Port int
	// Dial is the address the proxy connects to instead of Host:Port
	// ("" dials Host:Port). Tests point a made-up name at a local server.
	Dial string
}

func (r Rule) key() string { return net.JoinHostPort(strings.ToLower(r.Host), strconv.Itoa(r.Port)) }

// ParseRule reads HOST:PORT or HOST:PORT=DIAL.
func ParseRule(s string) (Rule, error) {
	hp, dial, _ := strings.Cut(s, "=")
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" {
		return Rule{}, fmt.Errorf("egress rule %q: want HOST:PORT or HOST:PORT=DIAL", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return Rule{}, fmt.Errorf("egress rule %q: bad port", s)
	}
	return Rule{Host: host, Port: n, Dial: dial}, nil
}

func (r Rule) String() string {
	if r.Dial != "" {
		return r.key() + "=" + r.Dial
	}
	return r.key()
}

// Decision is one request the proxy answered.
type Decision struct {
	Time    time.Time
	Method  string // CONNECT or the HTTP method
	Target  string // host:port asked for
	Allowed bool
	Err     string // dial or upstream error, if any
}

// Options configure a proxy.
type Options struct {
	Rules []Rule
	// Log (may be nil) gets every decision.
	Log func(Decision)
	// DialTimeout bounds each upstream connection attempt (default 10 s).
	DialTimeout time.Duration
}

// Proxy is a running egress proxy.
type Proxy struct {
	opt   Options
	allow map[string]Rule
	srv   *http.Server
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// New returns a proxy for the rules.
func New(opt Options) *Proxy {
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 10 * time.Second
	}
	p := &Proxy{opt: opt, allow: map[string]Rule{}, conns: map[net.Conn]struct{}{}}
	for _, r := range opt.Rules {
		p.allow[r.key()] = r
	}
	tr := &http.Transport{
		Proxy:               nil, // never chain to another proxy from the environment
		DialContext:         p.dialAllowed,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL = pr.In.URL; pr.Out.Host = pr.In.Host },
		Transport:     tr,
		FlushInterval: -1, // model answers stream (SSE): pass each write on at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.log(Decision{Method: r.Method, Target: hostPort(r.URL.Host, "80"), Allowed: true, Err: err.Error()})
			http.Error(w, "stem egress: upstream: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second,
		ConnState: p.track}
	return p
}

// Serve answers connections on ln until Close.
func (p *Proxy) Serve(ln net.Listener) error {
	err := p.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the proxy and ends every connection, tunnels included.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	return err
}

// track keeps hijacked tunnels closable by Close.
func (p *Proxy) track(c net.Conn, st http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch st {
	case http.StateNew, http.StateHijacked:
		p.conns[c] = struct{}{}
	case http.StateClosed:
		delete(p.conns, c)
	}
}

func (p *Proxy) log(d Decision) {
	if p.opt.Log != nil {
		d.Time = time.Now()
		p.opt.Log(d)
	}
}

// rule returns the rule allowing host:port, if any.
func (p *Proxy) rule(target string) (Rule, bool) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return Rule{}, false
	}
	r, ok := p.allow[net.JoinHostPort(strings.ToLower(host), port)]
	return r, ok
}

// dialAllowed dials the address of the rule for addr; anything else is
// refused here too, so no path through the transport reaches another host.
func (p *Proxy) dialAllowed(ctx context.Context, network, addr string) (net.Conn, error) {
	r, ok := p.rule(addr)
	if !ok {
		return nil, fmt.Errorf("%s is not allowed", addr)
	}
	to := addr
	if r.Dial != "" {
		to = r.Dial
	}
	d := net.Dialer{Timeout: p.opt.DialTimeout}
	return d.DialContext(ctx, "tcp", to)
}

func hostPort(h, defPort string) string {
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	return net.JoinHostPort(h, defPort)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		p.log(Decision{Method: r.Method, Target: r.Host, Allowed: false})
		refuse(w, "stem egress: only CONNECT and http:// requests in absolute form are proxied", http.StatusBadRequest)
		return
	}
	target := hostPort(r.URL.Host, "80")
	if _, ok := p.rule(target); !ok {
		p.log(Decision{Method: r.Method, Target: target, Allowed: false})
		refuse(w, "stem egress: "+target+" is not allowed for this agent", http.StatusForbidden)
		return
	}
	p.log(Decision{Method: r.Method, Target: target, Allowed: true})
	r.Header.Del("Proxy-Authorization")
	r.Header.Del("Proxy-Connection")
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := hostPort(r.Host, "443")
	if _, ok := p.rule(target); !ok {
		p.log(Decision{Method: r.Method, Target: target, Allowed: false})
		refuse(w, "stem egress: "+target+" is not allowed for this agent", http.StatusForbidden)
		return
	}
	up, err := p.dialAllowed(r.Context(), "tcp", target)
	if err != nil {
		p.log(Decision{Method: r.Method, Target: target, Allowed: true, Err: err.Error()})
		http.Error(w, "stem egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	p.log(Decision{Method: r.Method, Target: target, Allowed: true})
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "stem egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		up.Close()
		return
	}
	splice(c, brw.Reader, up)
}

// refuse answers and closes the connection: nothing else is read from a
// client that asked for something it may not have.
func refuse(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// splice copies both ways until either side ends, then closes both.
func splice(c net.Conn, buffered *bufio.Reader, up net.Conn) {
	defer c.Close()
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after its CONNECT are in the reader.
		io.Copy(up, io.MultiReader(io.LimitReader(buffered, int64(buffered.Buffered())), c))
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, up)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	// One side ended; give the other a moment to drain, then close both.
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}
