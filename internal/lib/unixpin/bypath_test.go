package unixpin_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// notInstanceSockets are the files outside this package that may connect
// to a unix socket by path, and why. Every other connect from non-test
// code must go through unixpin: the instance's socket directory is
// writable from its container, which can put a symlink (to any socket of
// the host) where t.sock, n.sock or g.sock belongs.
var notInstanceSockets = map[string]string{
	"internal/lib/unixpin/unixpin.go":    "the pinned connect itself (through /proc/self/fd/N)",
	"internal/engine/podman/podman.go":   "the Podman API socket, the host's own",
	"internal/engine/podman/service.go":  "the Podman API socket, the host's own",
	"internal/engine/inspect/inspect.go": "the Podman API socket, the host's own",
	"internal/gdbmi/bridge.go":           "the gdb bridge runs inside the container (is g.sock already served?)",
	"internal/agent/ptyproto/relay.go":   "the agent relay runs inside the container",
	"internal/egress/forward.go":         "runs inside the agent's sandbox, to the proxy socket stem mounted there",
	"internal/mcpcmd/agentbox.go":        "runs inside the agent's sandbox, to the MCP socket stem mounted there",
	"internal/nvim/client.go":            "go-client behind rpcguard, on a connection unixpin opened",
}

// testFixtures hold test-only helpers (non-_test.go files that only tests
// import); they run against servers the test itself started.
var testFixtures = []string{
	"internal/testenv/", "internal/tmux/tmuxtest/", "internal/nvim/nvimtest/",
	"internal/gate/sshdtest/", "internal/lib/beneath/swaptest/",
}

const goClientNvim = "github.com/neovim/go-client/nvim"
const goClientRPC = "github.com/neovim/go-client/msgpack/rpc"

// TestNoInstanceSocketDialledByPath reads every non-test Go file of the
// repository and fails on each connect to a unix socket by path outside
// the files above: net.Dial/DialTimeout/DialUnix and Dialer.Dial or
// DialContext with a "unix" network, unix.Connect and syscall.Connect,
// go-client's nvim.Dial (it dials by path) and nvim.New or
// rpc.NewEndpoint (go-client's decoder without rpcguard), and a tmux or
// nvim command run with -S, --server or --remote given anything but
// unixpin.ChildPath.
func TestNoInstanceSocketDialledByPath(t *testing.T) {
	root := repoRoot(t)
	var found []string
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || isFixture(rel) {
				return nil
			}
			if _, ok := notInstanceSockets[rel]; ok {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			for _, p := range dialsByPath(f) {
				found = append(found, rel+": "+p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("connects to a unix socket by path (use unixpin.Dial or unixpin.Open): %s", f)
	}
}

// TestByPathCheckCatches runs the check on code that dials by path, so a
// check that stopped seeing anything would fail here.
func TestByPathCheckCatches(t *testing.T) {
	src := `package x
import (
	"net"
	"os/exec"
	"syscall"
	"time"
	gonvim "github.com/neovim/go-client/nvim"
	"github.com/neovim/go-client/msgpack/rpc"
	"github.com/stem-edu/stem/internal/lib/unixpin"
)
func f(sock string) {
	net.Dial("unix", sock)
	net.DialTimeout("unix", sock, time.Second)
	net.DialUnix("unix", nil, nil)
	var d net.Dialer
	d.DialContext(nil, "unix", sock)
	syscall.Connect(0, nil)
	gonvim.Dial(sock)
	gonvim.New(nil, nil, nil, nil)
	rpc.NewEndpoint(nil, nil, nil)
	exec.Command("tmux", "-S", sock, "ls")
	exec.Command("nvim", "--server", sock, "--remote-send", "x")
	// Not by path: none of these may be reported.
	net.Dial("tcp", "127.0.0.1:1")
	exec.Command("tmux", "-S", unixpin.ChildPath, "ls")
}`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := dialsByPath(f)
	if len(got) != 10 {
		t.Fatalf("the check found %d of the 10 dials by path: %q", len(got), got)
	}
}

func isFixture(rel string) bool {
	for _, p := range testFixtures {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// dialsByPath lists the calls in f that connect to a unix socket by path.
func dialsByPath(f *ast.File) []string {
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg := ""
		if id, ok := sel.X.(*ast.Ident); ok {
			pkg = imports[id.Name]
		}
		what := exprString(sel)
		switch {
		case pkg == "net" && sel.Sel.Name == "DialUnix",
			(pkg == "syscall" || pkg == "golang.org/x/sys/unix") && sel.Sel.Name == "Connect",
			pkg == goClientNvim && (sel.Sel.Name == "Dial" || sel.Sel.Name == "New"),
			pkg == goClientRPC && sel.Sel.Name == "NewEndpoint":
			out = append(out, what)
		case (sel.Sel.Name == "Dial" || sel.Sel.Name == "DialTimeout" || sel.Sel.Name == "DialContext") && unixNetwork(call):
			out = append(out, what+`("unix", ...)`)
		case pkg == "os/exec" && (sel.Sel.Name == "Command" || sel.Sel.Name == "CommandContext"):
			if a := serverFlag(call); a != "" {
				out = append(out, what+"(... "+a+")")
			}
		}
		return true
	})
	return out
}

// unixNetwork reports whether one of the call's first two arguments is a
// string literal naming a unix network.
func unixNetwork(call *ast.CallExpr) bool {
	for i, a := range call.Args {
		if i > 1 {
			break
		}
		if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, _ := strconv.Unquote(lit.Value); strings.HasPrefix(s, "unix") {
				return true
			}
		}
	}
	return false
}

// serverFlag finds -S, --server or --remote* in a command's literal
// arguments followed by something other than unixpin.ChildPath.
func serverFlag(call *ast.CallExpr) string {
	for i, a := range call.Args {
		lit, ok := a.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		s, _ := strconv.Unquote(lit.Value)
		if s != "-S" && s != "--server" && !strings.HasPrefix(s, "--remote") {
			continue
		}
		if s != "-S" && s != "--server" {
			return s
		}
		if i+1 < len(call.Args) && exprString(call.Args[i+1]) == "unixpin.ChildPath" {
			continue
		}
		return s + " " + exprString(call.Args[min(i+1, len(call.Args)-1)])
	}
	return ""
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.BasicLit:
		return x.Value
	}
	return fmt.Sprintf("%T", e)
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}
