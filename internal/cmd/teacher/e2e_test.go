package teacher

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/access"
	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/gate/sshdtest"
	"github.com/stem-edu/stem/internal/lib/iostreams"
	"github.com/stem-edu/stem/internal/mcpconfig/clitest"
	"github.com/stem-edu/stem/internal/teacherkey"
	"github.com/stem-edu/stem/internal/testenv"
	"github.com/stem-edu/stem/internal/xdg"
)

// teacherRig is a student account behind a real sshd with one grant, and a
// teacher's home with the automation key.
type teacherRig struct {
	srv   *sshdtest.Server
	home  string // the teacher's HOME
	self  string // a built stemctl, the entries' ProxyCommand
	key   string
	grant access.Grant
	flags []string // --host/--key/--port/--ssh-option for stemctl teacher
}

// newTeacherRig starts the student's sshd with sshdExtra appended to its
// sshd_config.
func newTeacherRig(t *testing.T, sshdExtra ...string) *teacherRig {
	t.Helper()
	srv := sshdtest.Start(t, sshdExtra...)
	bin := sshdtest.StemMCP(t)
	r := &teacherRig{srv: srv, home: t.TempDir(), self: filepath.Join(testenv.Binary(t, "stemctl", "./cmd/stemctl"), "stemctl")}
	kp, err := teacherkey.Keygen(teacherkey.DefaultKeyPath(r.home, "kowalski"), "kowalski")
	if err != nil {
		t.Fatal(err)
	}
	r.key = kp.PrivatePath

	// The student's side: private directories, no instance (initialize,
	// tools/list and status need none).
	student := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"run", "state", "config"} {
		dirs[d] = filepath.Join(student, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	store, err := access.OpenStore(dirs["config"])
	if err != nil {
		t.Fatal(err)
	}
	m := &access.Manager{Store: store, AuthorizedKeys: srv.AuthorizedKeys, MCPBinary: bin, ConfigDirArg: dirs["config"],
		Env: map[string]string{"XDG_RUNTIME_DIR": dirs["run"], "STEM_STATE_DIR": dirs["state"], "STEM_CONFIG_DIR": dirs["config"]}}
	if r.grant, err = m.Grant(context.Background(), access.GrantRequest{Name: "kowalski", PublicKey: kp.PublicLine, Level: "observe"}); err != nil {
		t.Fatal(err)
	}
	r.flags = []string{"--host", srv.Host(), "--key", r.key, "--port", strconv.Itoa(srv.Port)}
	for _, o := range srv.ClientOptions() {
		r.flags = append(r.flags, "--ssh-option", o)
	}
	return r
}

// stemctl runs `stemctl teacher ARGS` with the teacher's HOME.
func (r *teacherRig) stemctl(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{
		IOStreams: ios,
		Getenv:    func(k string) string { return vars[k] },
		Dirs:      func() (xdg.Dirs, error) { return xdg.Dirs{Home: r.home}, nil },
		Self:      func() (string, error) { return r.self, nil },
	}
	cmd := NewCmdTeacher(f)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("stemctl teacher %v: %v\n%s", args, err, errOut.String())
	}
	return out.String() + errOut.String()
}

// cli runs an agent CLI with the teacher's HOME.
func (r *teacherRig) cli(t *testing.T, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = r.home
	cmd.Env = append([]string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s\n%s", filepath.Base(bin), args, err, out.String(), errOut.String())
	}
	if slices.Contains(args, "--json") {
		return out.String()
	}
	return out.String() + errOut.String()
}

func (r *teacherRig) entry(t *testing.T, name, instance string) ([]string, string) {
	t.Helper()
	tg := teacherkey.Target{Host: r.srv.Host(), Key: r.key, Port: r.srv.Port, SSHOptions: r.srv.ClientOptions(), Dial: r.self}
	e, err := Entry(tg, name, instance)
	if err != nil {
		t.Fatal(err)
	}
	return e.Args, e.Command + " " + strings.Join(e.Args, " ")
}

// The configuration stemctl writes is read back by the real agent CLIs
// with exactly the command and arguments written, and Claude Code connects
// through the real sshd to the real gate.
func TestTeacherConfigWithRealCLIsAndSSHD(t *testing.T) {
	r := newTeacherRig(t)
	codex, claude, gemini := clitest.Bin(t, "codex"), clitest.Bin(t, "claude"), clitest.Bin(t, "gemini")

	t.Run("codex", func(t *testing.T) {
		codexHome := filepath.Join(r.home, "codex")
		vars := map[string]string{"HOME": r.home, "CODEX_HOME": codexHome}
		for _, who := range []struct{ name, instance string }{{"anna", "native-amd64-demo-hello-t1"}, {"bob", ""}} {
			r.stemctl(t, vars, append([]string{"config", "--provider", "codex", "--name", who.name, "--instance", who.instance, "--write"}, r.flags...)...)
		}
		for _, who := range []struct{ name, instance string }{{"anna", "native-amd64-demo-hello-t1"}, {"bob", ""}} {
			var got struct {
				Transport struct {
					Command string   `json:"command"`
					Args    []string `json:"args"`
				} `json:"transport"`
			}
			out := r.cli(t, []string{"CODEX_HOME=" + codexHome}, codex, "mcp", "get", who.name, "--json")
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("codex mcp get: %v\n%s", err, out)
			}
			want, _ := r.entry(t, who.name, who.instance)
			if got.Transport.Command != "ssh" || !slices.Equal(got.Transport.Args, want) {
				t.Fatalf("codex reads %s %v\nwant ssh %v", got.Transport.Command, got.Transport.Args, want)
			}
		}
	})

	t.Run("gemini", func(t *testing.T) {
		vars := map[string]string{"HOME": r.home}
		r.stemctl(t, vars, append([]string{"config", "--provider", "gemini", "--name", "anna", "--write"}, r.flags...)...)
		// Gemini prints command and arguments joined by spaces, which alone
		// would not show a wrong split (the ProxyCommand argument has
		// spaces); Connected shows it ran them and reached the gate
		// through the real sshd. It connects only in a trusted folder.
		out := r.cli(t, []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}, gemini, "mcp", "list")
		_, line := r.entry(t, "anna", "")
		if !strings.Contains(out, "anna: "+line+" (stdio) - Connected") {
			t.Fatalf("gemini mcp list:\n%s\nwant anna: %s (stdio) - Connected\nsshd log:\n%s", out, line, r.srv.Log())
		}
	})

	t.Run("claude connects through sshd", func(t *testing.T) {
		vars := map[string]string{"HOME": r.home}
		r.stemctl(t, vars, append([]string{"config", "--provider", "claude", "--scope", "user", "--name", "anna", "--write"}, r.flags...)...)
		out := r.cli(t, nil, claude, "mcp", "list")
		_, line := r.entry(t, "anna", "")
		if !strings.Contains(out, "anna: "+line+" - ✔ Connected") && !strings.Contains(out, "anna: "+line+" - ✓ Connected") {
			t.Fatalf("claude mcp list:\n%s\nwant anna: %s - ✔ Connected\nsshd log:\n%s", out, line, r.srv.Log())
		}
		// The printed `claude mcp add` command registers the same entry.
		printed := r.stemctl(t, vars, append([]string{"config", "--provider", "claude", "--scope", "user", "--name", "bob"}, r.flags...)...)
		var add string
		for _, l := range strings.Split(printed, "\n") {
			if strings.HasPrefix(l, "claude mcp add ") {
				add = l
			}
		}
		if add == "" {
			t.Fatalf("no claude mcp add line in:\n%s", printed)
		}
		sh := exec.Command("sh", "-c", strings.Replace(add, "claude", shellQuoteOne(claude), 1))
		sh.Env = []string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH")}
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", add, err, out)
		}
		got := r.cli(t, nil, claude, "mcp", "get", "bob")
		if _, bobLine := r.entry(t, "bob", ""); !strings.Contains(got, "Args: "+strings.TrimPrefix(bobLine, "ssh ")) {
			t.Fatalf("claude mcp get bob:\n%s", got)
		}
	})

	t.Run("teacher status", func(t *testing.T) {
		out := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"status", "--json"}, r.flags...)...)
		var st struct {
			Grant, Level string
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.Grant != "kowalski" || st.Level != "observe" {
			t.Fatalf("teacher status: %v\n%s", err, out)
		}
		text := r.stemctl(t, map[string]string{"HOME": r.home}, append([]string{"status"}, r.flags...)...)
		if !strings.Contains(text, `grant "kowalski", level "observe"`) {
			t.Fatalf("teacher status:\n%s", text)
		}
	})
}

func shellQuoteOne(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
