//go:build remote && containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package podman

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	dockercontainer "github.com/docker/docker/api/types/container"

	"github.com/containers/podman/v5/libpod/define"
	"github.com/containers/podman/v5/pkg/api/handlers"
	"github.com/containers/podman/v5/pkg/bindings"
	"github.com/containers/podman/v5/pkg/bindings/containers"

	"github.com/stem-edu/stem/internal/engine"
)

// execStartPath is the libpod endpoint that starts and attaches an exec
// session. Any version prefix routes to the service's own handler; v4.0.0 is
// the oldest API stem supports (Debian 12 ships 4.3).
const execStartPath = "/v4.0.0/libpod/exec/%s/start"

// Exec runs a process in a running container, streams its input and output,
// and returns its exit code. Without a TTY stdout and stderr stay separate;
// with one they are merged, as on a terminal. Cancelling ctx closes the
// stream and returns ctx's error.
//
// The attach is done here rather than with the bindings' ExecStartAndAttach,
// which reads the terminal state and size of this process's own os.Stdin and
// does not stop when ctx is cancelled.
func (e *Engine) Exec(ctx context.Context, id string, spec engine.ExecSpec) (v int, err error) {
	defer e.explain(ctx, &err)
	if len(spec.Cmd) == 0 {
		return -1, fmt.Errorf("exec in container %s: no command", id)
	}
	cctx := withConn{Context: ctx, conn: e.conn}
	first := firstSize(spec)
	cmd := spec.Cmd
	if first != nil {
		cmd = sizedFirst(*first, cmd)
	}
	cfg := &handlers.ExecCreateConfig{ExecOptions: dockercontainer.ExecOptions{
		Cmd:          cmd,
		Env:          envList(spec.Env),
		WorkingDir:   spec.WorkDir,
		Tty:          spec.Tty,
		AttachStdin:  spec.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}}
	sid, err := e.execCreate(cctx, id, cfg)
	if err != nil {
		return -1, err
	}
	defer e.execRemove(cctx, sid)

	if err := e.execAttach(ctx, sid, spec, first); err != nil {
		return -1, e.execLost(cctx, sid, fmt.Errorf("exec %q in container %s: %w", spec.Cmd[0], id, err))
	}
	code, err := e.execExitCode(cctx, sid)
	if err != nil {
		return -1, e.execLost(cctx, sid, fmt.Errorf("exec %q in container %s: %w", spec.Cmd[0], id, err))
	}
	return code, nil
}

// execLost explains a session whose stream broke or whose end could not
// be read because the service went away under it: the stream ends as the
// service dies, as it does when the process exits, so the service is
// asked. An engine that starts its service starts it again and says what
// became of the process (it runs on, under conmon), whose output from the
// service's death on is lost.
func (e *Engine) execLost(ctx context.Context, sid string, err error) error {
	path, ok := unixPath(e.uri)
	if !ok || ctx.Err() != nil || probe(ctx, path) == nil {
		return err
	}
	msg := fmt.Sprintf("the Podman service at %s stopped while the command ran (it was killed or restarted), so the command's output from then on is lost", e.uri)
	if !e.opts.StartService {
		return &HintError{Err: err, Hint: msg + "; " + startHint(e.uri) + ", then run the command again"}
	}
	if _, serr := startService(ctx, e.opts, path); serr != nil {
		return &HintError{Err: err, Hint: msg + ", and stem could not start the service again: " + serr.Error()}
	}
	ictx, cancel := e.call(ctx)
	defer cancel()
	s, ierr := containers.ExecInspect(ictx, sid, nil)
	if ierr != nil {
		s = nil
	}
	state := execState(s)
	return &HintError{Err: err, Hint: msg + "; stem started the service again, and the command " + state + ": run it again if it must finish"}
}

// firstSize is the terminal's size when the exec begins, if the caller
// has one ready.
func firstSize(spec engine.ExecSpec) *engine.TermSize {
	if !spec.Tty || spec.Resize == nil {
		return nil
	}
	select {
	case sz := <-spec.Resize:
		if sz.Rows > 0 && sz.Cols > 0 && sz.Rows <= 0xffff && sz.Cols <= 0xffff {
			return &sz
		}
	default:
	}
	return nil
}

// sizedFirst runs cmd after sizing its terminal from inside. The start
// request carries the size, but conmon applies it through its control
// pipe, which it may read only once the process runs (Podman before it
// passed ConsoleSize into the process's spec): a program that asks for its
// size at once could see 0x0 — an agent CLI laid out for no columns. The
// shell replaces itself with cmd, which keeps its arguments as given.
func sizedFirst(sz engine.TermSize, cmd []string) []string {
	return append([]string{"/bin/sh", "-c", `stty rows "$1" cols "$2" 2>/dev/null; shift 2; exec "$@"`,
		"stem-exec", strconv.Itoa(sz.Rows), strconv.Itoa(sz.Cols)}, cmd...)
}

// execState says what the service knows of a session's process. A
// service killed after the stream began but before it recorded the start
// has the session as created: not running, not stopped, exit code 0,
// which says nothing of the process.
func execState(s *define.InspectExecSession) string {
	switch {
	case s == nil || (!s.Running && !s.CanRemove):
		return "may still be running in the container"
	case s.Running:
		return "still runs in the container"
	default:
		return fmt.Sprintf("has ended with exit code %d", s.ExitCode)
	}
}

func (e *Engine) execCreate(ctx context.Context, id string, cfg *handlers.ExecCreateConfig) (string, error) {
	ctx, cancel := e.call(ctx)
	defer cancel()
	sid, err := containers.ExecCreate(ctx, id, cfg)
	if e.restarted(ctx, err) {
		// A session created and never started costs nothing.
		sid, err = containers.ExecCreate(ctx, id, cfg)
	}
	if err != nil {
		// 4.3 answers 500 "container state improper" where later versions say 409.
		if apiCode(err) == http.StatusConflict || strings.Contains(err.Error(), "state improper") {
			return "", fmt.Errorf("exec in container %s: it is not running: %w", id, err)
		}
		return "", notFound(err, "exec in container %s", id)
	}
	return sid, nil
}

// execRemove frees the session on services that support it (4.8 and later
// remove it themselves otherwise only with the container).
func (e *Engine) execRemove(ctx context.Context, sid string) {
	v := bindings.ServiceVersion(e.conn)
	if v.Major < 4 || (v.Major == 4 && v.Minor < 8) {
		return
	}
	ctx, cancel := e.call(context.WithoutCancel(ctx))
	defer cancel()
	_ = containers.ExecRemove(ctx, sid, nil)
}

// forwardResize applies each size from sizes to the session's terminal until
// ctx ends or sizes is closed. A failed resize is not worth ending the
// session for: the process only keeps its old size.
func (e *Engine) forwardResize(ctx context.Context, sid string, sizes <-chan engine.TermSize) {
	cctx := withConn{Context: ctx, conn: e.conn}
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-sizes:
			if !ok {
				return
			}
			if sz.Rows <= 0 || sz.Cols <= 0 {
				continue
			}
			rctx, cancel := e.call(cctx)
			_ = containers.ResizeExecTTY(rctx, sid, new(containers.ResizeExecTTYOptions).WithHeight(sz.Rows).WithWidth(sz.Cols))
			cancel()
		}
	}
}

// execAttach starts the session on a connection of its own and copies the
// streams until the process ends.
func (e *Engine) execAttach(ctx context.Context, sid string, spec engine.ExecSpec, first *engine.TermSize) error {
	dctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	conn, err := e.client.GetDialer(dctx)
	if e.restarted(dctx, err) {
		conn, err = e.client.GetDialer(dctx)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", e.uri, err)
	}
	defer conn.Close()
	// Closing the connection is what unblocks the copies on cancellation.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	start := handlers.ExecStartConfig{Tty: spec.Tty}
	if first != nil {
		start.Height, start.Width = uint16(first.Rows), uint16(first.Cols)
	}
	body, err := json.Marshal(start)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://d"+fmt.Sprintf(execStartPath, url.PathEscape(sid)), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return ctxErr(ctx, fmt.Errorf("start exec session: %w", err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("start exec session: %w", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("start exec session: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}

	if spec.Tty && spec.Resize != nil {
		go e.forwardResize(ctx, sid, spec.Resize)
	}
	if spec.Stdin != nil {
		// Ends when Stdin does; the process then sees end of file. If the
		// process ends first, the goroutine ends at Stdin's next read.
		go func() {
			if _, err := io.Copy(conn, spec.Stdin); err == nil {
				if cw, ok := conn.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
		}()
	}
	stdout, stderr := orDiscard(spec.Stdout), orDiscard(spec.Stderr)
	if spec.Tty {
		_, err = io.Copy(stdout, br)
	} else {
		err = demux(br, stdout, stderr)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return ctxErr(ctx, err)
	}
	return ctx.Err()
}

// ctxErr prefers the context's error: a closed connection after
// cancellation is a consequence, not the cause.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// demux splits the service's multiplexed stream: frames of an 8-byte header
// (stream id, 3 zero bytes, big-endian length) and the payload.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	buf := make([]byte, 32*1024)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read exec stream: %w", err)
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("read exec stream: %w", err)
		}
		var w io.Writer
		switch hdr[0] {
		case 0, 1: // 0 is stdin echoed back by some services
			w = stdout
		case 2:
			w = stderr
		case 3:
			return fmt.Errorf("exec stream: %s", bytes.TrimSpace(buf[:n]))
		default:
			return fmt.Errorf("exec stream: unknown stream %d", hdr[0])
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return fmt.Errorf("write exec output: %w", err)
		}
	}
}

// execExitCode waits for the service to record the session's end. The stream
// closes as the process exits; the exit code lands a moment later.
func (e *Engine) execExitCode(ctx context.Context, sid string) (int, error) {
	ctx, cancel := e.call(ctx)
	defer cancel()
	wait := 2 * time.Millisecond
	for {
		s, err := containers.ExecInspect(ctx, sid, nil)
		if err != nil {
			return -1, fmt.Errorf("inspect exec session: %w", err)
		}
		if !s.Running {
			return s.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wait for exec session to end: %w", ctx.Err())
		case <-time.After(wait):
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
