package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// rig is a proxy on a Unix socket with the in-sandbox forwarder in front
// of it (the path an agent's request takes), an allowed upstream reached
// under a made-up name, and a second local server standing for the host's
// other loopback services.
type rig struct {
	proxyURL  *url.URL
	model     *httptest.Server
	other     *httptest.Server
	mu        sync.Mutex
	decisions []Decision
}

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{}
	r.model = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-req.Context().Done() // holds the stream open: the first event must arrive anyway
			return
		}
		fmt.Fprintf(w, "model %s %s", req.Method, req.URL.Path)
	}))
	t.Cleanup(r.model.Close)
	r.other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, "HOST-CANARY")
	}))
	t.Cleanup(r.other.Close)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{Rules: []Rule{{Host: "model.stem.invalid", Port: 8080, Dial: r.model.Listener.Addr().String()}},
		Log: func(d Decision) { r.mu.Lock(); r.decisions = append(r.decisions, d); r.mu.Unlock() }})
	go p.Serve(uln)
	t.Cleanup(func() { p.Close() })
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go Forward(ctx, tln, sock)
	r.proxyURL = &url.URL{Scheme: "http", Host: tln.Addr().String()}
	return r
}

func (r *rig) client() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(r.proxyURL)}, Timeout: 10 * time.Second}
}

// connect sends a CONNECT for target and returns the status line and the
// tunnel.
func (r *rig) connect(t *testing.T, target string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(line), c, br
}

func TestConnectOnlyToTheAllowedEndpoint(t *testing.T) {
	r := newRig(t)
	status, c, br := r.connect(t, "model.stem.invalid:8080")
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("allowed CONNECT: %s", status)
	}
	fmt.Fprint(c, "GET /v1/messages HTTP/1.1\r\nHost: model.stem.invalid:8080\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "model GET /v1/messages" {
		t.Fatalf("through the tunnel: %q", body)
	}
	// The host's other loopback services, by address and by name; the
	// allowed name on another port; the allowed upstream's real address;
	// the wider network.
	otherAddr := r.other.Listener.Addr().String()
	_, otherPort, _ := net.SplitHostPort(otherAddr)
	modelAddr := r.model.Listener.Addr().String()
	for _, target := range []string{otherAddr, "localhost:" + otherPort, "[::1]:" + otherPort, "model.stem.invalid:443",
		"model.stem.invalid:" + otherPort, modelAddr, "MODEL.stem.invalid.:8080", "example.com:443", "10.0.0.1:80"} {
		status, c, br := r.connect(t, target)
		if !strings.Contains(status, " 403 ") {
			t.Errorf("CONNECT %s: %s", target, status)
			continue
		}
		// Nothing is tunnelled after a refusal.
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		rest, _ := io.ReadAll(io.LimitReader(br, 4096))
		if strings.Contains(string(rest), "HOST-CANARY") || strings.Contains(string(rest), "model GET") {
			t.Errorf("CONNECT %s: a refused tunnel carried %q", target, rest)
		}
	}
	// Control: the canary service answers a direct request, so a refusal
	// above is the proxy's doing.
	resp, err = http.Get(r.other.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "HOST-CANARY" {
		t.Fatalf("control: %q", b)
	}
}

func TestAbsoluteFormRequests(t *testing.T) {
	r := newRig(t)
	cl := r.client()
	resp, err := cl.Post("http://model.stem.invalid:8080/v1/responses", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "model POST /v1/responses" {
		t.Fatalf("allowed: %s %q", resp.Status, body)
	}
	_, otherPort, _ := net.SplitHostPort(r.other.Listener.Addr().String())
	for _, u := range []string{r.other.URL + "/", "http://localhost:" + otherPort + "/", "http://model.stem.invalid/", "http://example.com/"} {
		resp, err := cl.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "HOST-CANARY") {
			t.Errorf("%s: %s %q", u, resp.Status, b)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	allowed, refused := 0, 0
	for _, d := range r.decisions {
		if d.Allowed {
			allowed++
		} else {
			refused++
		}
	}
	if allowed != 1 || refused != 4 {
		t.Errorf("decisions %+v", r.decisions)
	}
}

// An answer that streams (the model's SSE) reaches the client event by
// event, not when the upstream finishes.
func TestStreamingPassesThrough(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://model.stem.invalid:8080/stream", nil)
	resp, err := r.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
}

func TestParseRule(t *testing.T) {
	r, err := ParseRule("api.anthropic.com:443")
	if err != nil || r.Host != "api.anthropic.com" || r.Port != 443 || r.Dial != "" {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = ParseRule("model.stem.invalid:80=127.0.0.1:4000")
	if err != nil || r.Dial != "127.0.0.1:4000" || r.String() != "model.stem.invalid:80=127.0.0.1:4000" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "host", ":443", "h:0", "h:70000", "h:x"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}

// BenchmarkProxyOverhead compares a model-sized request sent straight to
// the upstream with the same request through the forwarder and the proxy
// (the sandbox's path); the difference is the proxy's cost per request.
func BenchmarkProxyOverhead(b *testing.B) {
	r := newRig(b)
	payload := strings.Repeat("x", 20<<10)
	direct := &http.Client{}
	via := r.client()
	run := func(b *testing.B, cl *http.Client, u string) {
		for i := 0; i < b.N; i++ {
			resp, err := cl.Post(u, "application/json", strings.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, direct, r.model.URL+"/v1/messages") })
	b.Run("proxy", func(b *testing.B) { run(b, via, "http://model.stem.invalid:8080/v1/messages") })
	b.Run("proxy-new-connection", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(r.proxyURL), DisableKeepAlives: true}}
			run(&testing.B{N: 1}, cl, "http://model.stem.invalid:8080/v1/messages")
		}
	})
}
