package class

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/stem-edu/stem/internal/class"
	"github.com/stem-edu/stem/internal/class/standin"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// Real student accounts for 30 (let alone 200) would take most of an hour
// to set up here (an image load of ~40 s each, two cores), so these
// benchmarks run the built stem-mcp class and OpenSSH's ssh against
// stand-in gates on one loopback port (package standin: the same SSH
// exec verbs and MCP tools as the gate; its status costs one fsync'd log
// append, as the gate's audit does, but probes no tmux or Neovim).

// benchClass writes a class of n stand-in students and returns the
// built stem-mcp and the environment that runs `stem-mcp class --class lab`.
func benchClass(b *testing.B, n int) (string, []string) {
	b.Helper()
	return benchClassWith(b, n)
}

// benchClassWith is benchClass with further stand-in students named
// extra (a name "hostile-MODE..." is a hostile gate).
func benchClassWith(b testing.TB, n int, extra ...string) (string, []string) {
	b.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Skip("needs OpenSSH's ssh")
	}
	bin := testenv.Binary(b, "stem-mcp", "./cmd/stem-mcp")
	testenv.Binary(b, "stem-dial", "./cmd/stem-dial") // beside stem-mcp, as installed
	home := b.TempDir()
	kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(home, "kowalski"), "kowalski")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := standin.Start(kp.PublicLine, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	known := filepath.Join(home, "lab.known_hosts")
	var csv strings.Builder
	for i := range n {
		fmt.Fprintf(&csv, "s%03d,u%03d@127.0.0.1,%d\n", i, i, srv.Port)
	}
	for _, x := range extra {
		fmt.Fprintf(&csv, "%s,%s@127.0.0.1,%d\n", x, x, srv.Port)
	}
	roster := filepath.Join(home, "lab.csv")
	for p, data := range map[string]string{known: srv.KnownHosts + "\n", roster: csv.String()} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cfg := filepath.Join(home, ".config", "stem")
	ios, _, _, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return map[string]string{"HOME": home}[k] },
		Dirs: func() (xdg.Dirs, error) { return xdg.Dirs{Home: home, Config: cfg}, nil }}
	for _, args := range [][]string{
		{"init", "lab", "--key", kp.PrivatePath, "--ssh-option", "UserKnownHostsFile=" + known, "--ssh-option", "GlobalKnownHostsFile=/dev/null",
			"--ssh-option", "StrictHostKeyChecking=yes", "--ssh-option", "LogLevel=ERROR"},
		{"import", "lab", roster},
	} {
		cmd := NewCmdClass(f)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			b.Fatalf("stemctl class %v: %v\n%s", args, err, errOut)
		}
	}
	return filepath.Join(bin, "stem-mcp"), []string{"HOME=" + home, "STEM_CONFIG_DIR=" + cfg, "PATH=" + os.Getenv("PATH")}
}

// classProc is a running `stem-mcp class` and an MCP client of it.
type classProc struct {
	cmd *exec.Cmd
	c   *client.Client
	in  io.WriteCloser
}

// startClass starts stem-mcp class; extra flags follow (a later
// --timeout wins).
func startClass(b testing.TB, mcpBin string, env []string, extra ...string) *classProc {
	b.Helper()
	// A long per-student timeout: the machine is shared, and a student
	// who times out fails the benchmark rather than passing for fast.
	cmd := exec.Command(mcpBin, append([]string{"class", "--class", "lab", "--timeout", "2m"}, extra...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &classProc{cmd: cmd, in: in, c: client.NewClient(transport.NewIO(out, in, io.NopCloser(strings.NewReader(""))))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := p.c.Initialize(ctx, req); err != nil {
		b.Fatal(err)
	}
	return p
}

// stop ends the server and every ssh it started.
func (p *classProc) stop() {
	p.c.Close()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
}

type overview struct {
	Students []class.Row  `json:"students"`
	Sessions []class.Link `json:"sessions"`
}

// overview calls class_overview; every student must be reachable when
// all is true.
func (p *classProc) overview(b testing.TB, all bool) overview {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "class_overview"
	res, err := p.c.CallTool(ctx, req)
	if err != nil || res.IsError {
		b.Fatalf("class_overview: %v %+v", err, res)
	}
	var ov overview
	if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &ov); err != nil {
		b.Fatal(err)
	}
	for _, r := range ov.Students {
		if all && r.Reach != class.ReachOK {
			b.Fatalf("%s: %s %s", r.Student, r.Reach, r.Why)
		}
	}
	return ov
}

func p50(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2].Microseconds()) / 1000
}

func p99(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()) / 1000
}

// BenchmarkClassOverviewOpen: class_overview over open sessions, and the
// memory of stem-mcp class holding them (its ssh processes apart).
func BenchmarkClassOverviewOpen(b *testing.B) {
	for _, n := range []int{30, 200} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mcpBin, env := benchClass(b, n)
			start := time.Now()
			p := startClass(b, mcpBin, env)
			defer p.stop()
			for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
				ov, up := p.overview(b, false), 0
				for _, l := range ov.Sessions {
					if l.Connected {
						up++
					}
				}
				if up == n {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d sessions open", up, n)
				}
			}
			connected := time.Since(start)
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				ov := p.overview(b, true)
				took = append(took, time.Since(t0))
				for _, r := range ov.Students {
					if r.Via != "session" {
						b.Fatalf("%s asked via %q", r.Student, r.Via)
					}
				}
			}
			b.StopTimer()
			self, kids := rss(p.cmd.Process.Pid)
			b.ReportMetric(p50(took), "p50-ms")
			b.ReportMetric(p99(took), "p99-ms")
			b.ReportMetric(connected.Seconds(), "all-connected-s")
			b.ReportMetric(float64(self)/1024, "rss-MiB")
			b.ReportMetric(float64(kids)/1024, "ssh-rss-MiB")
		})
	}
}

// BenchmarkClassOverviewCold: from nothing, stem-mcp class started to its
// first class_overview answered (every student over a new connection).
func BenchmarkClassOverviewCold(b *testing.B) {
	for _, n := range []int{30, 200} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mcpBin, env := benchClass(b, n)
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				p := startClass(b, mcpBin, env)
				p.overview(b, true)
				took = append(took, time.Since(t0))
				p.stop()
			}
			b.ReportMetric(p50(took), "p50-ms")
		})
	}
}

// rss returns the resident memory (KiB) of pid and of all its descendants.
func rss(pid int) (self, kids int) {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; cut after ')'.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], id)
			}
		}
	}
	self = vmRSS(pid)
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			kids += vmRSS(c)
			walk(c)
		}
	}
	walk(pid)
	return self, kids
}

func vmRSS(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}
