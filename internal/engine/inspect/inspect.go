// Package inspect reads one container's id, state and labels from Podman
// without the Go bindings: stem-mcp starts once per SSH connection and only
// needs this check, and linking the bindings would cost start-up time. It
// speaks the libpod REST API over the service socket with net/http, and
// falls back to the podman CLI when no service answers.
package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stem-edu/stem/internal/engine"
)

// Inspector implements verify.Inspector.
type Inspector struct {
	// Sockets are tried in order; the first that answers is kept.
	Sockets []string
	// PodmanCLI is the podman binary for the fallback ("" disables it).
	PodmanCLI string
	mu        sync.Mutex // guards client and socket: calls run concurrently
	client    *http.Client
	socket    string
}

// SocketCandidates lists the Podman API sockets in podman's own order:
// CONTAINER_HOST (unix://), the rootless socket, the rootful one.
func SocketCandidates(getenv func(string) string) []string {
	var out []string
	if h := getenv("CONTAINER_HOST"); strings.HasPrefix(h, "unix://") {
		out = append(out, strings.TrimPrefix(h, "unix://"))
	}
	if os.Geteuid() != 0 {
		if rt := getenv("XDG_RUNTIME_DIR"); rt != "" {
			out = append(out, filepath.Join(rt, "podman", "podman.sock"))
		}
	}
	return append(out, "/run/podman/podman.sock")
}

// New returns an Inspector over the usual sockets with the CLI fallback.
func New(getenv func(string) string) *Inspector {
	cli, _ := exec.LookPath("podman")
	return &Inspector{Sockets: SocketCandidates(getenv), PodmanCLI: cli}
}

// 12-64 of these, the length checked apart (a bounded repetition compiles
// to that many copies of the class, paid at every start-up).
var idRE = regexp.MustCompile(`^[0-9a-f]+$`)

// Inspect returns the container; engine.ErrNotFound (wrapped) if it is gone.
func (in *Inspector) Inspect(ctx context.Context, id string) (engine.Container, error) {
	if len(id) < 12 || len(id) > 64 || !idRE.MatchString(id) {
		return engine.Container{}, fmt.Errorf("inspect: %q is not a container id", id)
	}
	c, err := in.viaAPI(ctx, id)
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		return c, err
	}
	if in.PodmanCLI == "" {
		return engine.Container{}, err
	}
	c, cerr := in.viaCLI(ctx, id)
	if cerr != nil {
		return c, fmt.Errorf("%v; podman CLI: %w", err, cerr)
	}
	return c, nil
}

type apiContainer struct {
	ID      string    `json:"Id"`
	Name    string    `json:"Name"`
	Created time.Time `json:"Created"`
	Image   string    `json:"ImageName"`
	ImageID string    `json:"Image"`
	State   struct {
		Status   string `json:"Status"`
		Running  bool   `json:"Running"`
		Pid      int    `json:"Pid"`
		ExitCode int    `json:"ExitCode"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func (a apiContainer) container() engine.Container {
	return engine.Container{ID: a.ID, Name: a.Name, Image: a.Image, ImageID: a.ImageID, Labels: a.Config.Labels,
		State: a.State.Status, Running: a.State.Running, Pid: a.State.Pid, Created: a.Created, ExitCode: a.State.ExitCode}
}

// api returns the client of the first socket that exists, and that socket.
func (in *Inspector) api() (*http.Client, string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.client == nil {
		for _, s := range in.Sockets {
			if fi, err := os.Stat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
				sock := s
				in.socket = s
				in.client = &http.Client{Transport: &http.Transport{
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						var d net.Dialer
						return d.DialContext(ctx, "unix", sock)
					},
				}}
				break
			}
		}
	}
	return in.client, in.socket
}

// forget drops a client whose service did not answer: the next call looks
// for the socket again (a service started again may be elsewhere).
func (in *Inspector) forget(c *http.Client) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.client == c {
		in.client = nil
	}
	c.CloseIdleConnections()
}

func (in *Inspector) viaAPI(ctx context.Context, id string) (engine.Container, error) {
	client, socket := in.api()
	if client == nil {
		return engine.Container{}, fmt.Errorf("no Podman API socket among %s", strings.Join(in.Sockets, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := "http://d/v4.0.0/libpod/containers/" + url.PathEscape(id) + "/json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return engine.Container{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		in.forget(client)
		return engine.Container{}, fmt.Errorf("podman API at %s: %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return engine.Container{}, fmt.Errorf("container %.12s: %w", id, engine.ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return engine.Container{}, fmt.Errorf("podman API: inspect %.12s: %s", id, resp.Status)
	}
	var a apiContainer
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4<<20)).Decode(&a); err != nil {
		return engine.Container{}, fmt.Errorf("podman API: decode inspect: %w", err)
	}
	return a.container(), nil
}

func (in *Inspector) viaCLI(ctx context.Context, id string) (engine.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, in.PodmanCLI, "container", "inspect", "--format", "json", id)
	cmd.WaitDelay = 2 * time.Second // a child holding the pipe must not outlast the deadline
	cmd.Env = localEnv(os.Environ())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "no such container") {
			return engine.Container{}, fmt.Errorf("container %.12s: %w", id, engine.ErrNotFound)
		}
		return engine.Container{}, fmt.Errorf("podman container inspect: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var list []apiContainer
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
		return engine.Container{}, fmt.Errorf("podman container inspect: unexpected output (%v)", err)
	}
	return list[0].container(), nil
}

// localEnv makes the podman CLI read this host's containers itself: with
// CONTAINER_HOST naming a local socket it would be a client of the very
// service that did not answer. A remote CONTAINER_HOST is kept (the local
// store is another host's).
func localEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "CONTAINER_HOST="); ok && (h == "" || strings.HasPrefix(h, "unix://")) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
