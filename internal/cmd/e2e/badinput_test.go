package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// badCase is one hostile or careless invocation and what its error must say.
type badCase struct {
	args []string
	env  []string
	code int      // 1: refused; 2: usage error (message, then the usage line)
	want []string // substrings of the message line
}

// goisms are signs of an error that reached the user unexplained.
var goisms = []string{"panic:", "goroutine ", "runtime error", "invalid memory address", "lstat ", "EvalSymlinks", "strconv.", "%!", "Error: "}

// checkBad runs c and checks the error is one clear line on stderr, nothing
// on stdout, with the exit code asked for.
func (a *account) checkBad(c badCase) {
	a.t.Helper()
	r, err := a.Run(c.env, c.args...)
	if err != nil {
		a.t.Fatalf("%q: %v", c.args, err)
	}
	checkResult(a.t, c, r)
}

func checkResult(t *testing.T, c badCase, r result) {
	t.Helper()
	if r.Code != c.code {
		t.Errorf("%q: exit %d, want %d\nstdout: %s\nstderr: %s", c.args, r.Code, c.code, r.Stdout, r.Stderr)
		return
	}
	if r.Stdout != "" {
		t.Errorf("%q: an error also wrote to stdout: %q", c.args, r.Stdout)
	}
	line, rest, _ := strings.Cut(r.Stderr, "\n")
	switch c.code {
	case 1:
		if rest != "" {
			t.Errorf("%q: the error is not one line:\n%s", c.args, r.Stderr)
		}
	case 2:
		if !strings.HasPrefix(rest, "\nUsage:\n  stemctl ") {
			t.Errorf("%q: a usage error without the usage line:\n%s", c.args, r.Stderr)
		}
	}
	if !strings.HasPrefix(line, "stemctl: ") || len(line) > 500 {
		t.Errorf("%q: the message is not a short stemctl line (%d bytes): %q", c.args, len(line), line)
	}
	for _, w := range c.want {
		if !strings.Contains(line, w) {
			t.Errorf("%q: message lacks %q: %s", c.args, w, line)
		}
	}
	for _, g := range goisms {
		if strings.Contains(r.Stderr, g) {
			t.Errorf("%q: message shows %q (unexplained internals): %s", c.args, g, r.Stderr)
		}
	}
}

// snapshot lists every path under root with its kind, mode, size, link
// target and content digest, so any write, creation or removal shows.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			e += " -> " + to
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e += fmt.Sprintf(" %d %x", len(data), sha256.Sum256(data))
		}
		lines = append(lines, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// withoutLocks drops the per-instance lock files from a state snapshot:
// stemctl takes an instance's lock (an empty file it keeps) before it looks
// at the runtime directory, so a refused `up` may leave one.
func withoutLocks(snap string) string {
	var keep []string
	for _, l := range strings.Split(snap, "\n") {
		if l == "locks drwx------" || (strings.HasPrefix(l, "locks/") && strings.Contains(l, ".lock -rw------- 0 ")) {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// hostileCards adds series "bad" (one broken card each), a card and a series
// that are symlinks out of the workspace, and returns the outside directory.
func hostileCards(t *testing.T, ws string) string {
	t.Helper()
	outside := t.TempDir()
	good := func(extra string) string {
		return "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n" + extra
	}
	huge := good(`title = "` + strings.Repeat("x", 3<<20) + "\"\n")
	cards := map[string]string{
		"malformed":  "schema = 1\n[[tasks]\nid = \"1\"\n",
		"types":      "schema = \"one\"\n[[tasks]]\nid = \"1\"\nprofiles = [\"native-amd64\"]\n",
		"notlist":    "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = \"native-amd64\"\n",
		"unknown":    good("comand = \"make\"\n") + "colour = \"red\"\n",
		"badprofile": "schema = 1\n[[tasks]]\nid = \"1\"\nprofiles = [\"x86\"]\n",
		"badid":      "schema = 1\n[[tasks]]\nid = \"1;rm -rf /\"\nprofiles = [\"native-amd64\"]\n",
		"updir":      good("dir = \"../../..\"\n"),
		"absdir":     good("dir = \"/etc\"\n"),
		"linkdir":    good("dir = \"out\"\n"),
		"nodir":      good("dir = \"missing\"\n"),
		"filedir":    good("dir = \"f\"\n"),
		"huge":       huge,
		"binary":     "schema = 1\n\xff\xfe\x00\x01garbage\n",
		"empty":      "",
		"gitlink":    good(""),
		"statelink":  good(""),
	}
	for name, content := range cards {
		dir := filepath.Join(ws, "bad", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stem.toml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(ws, "bad")
	must(os.Symlink("/etc", filepath.Join(bad, "linkdir", "out")))
	must(os.WriteFile(filepath.Join(bad, "filedir", "f"), nil, 0o644))
	must(os.Symlink(outside, filepath.Join(bad, "gitlink", ".git")))
	must(os.Symlink(outside, filepath.Join(bad, "statelink", ".stem")))
	// Manifests that are not files: a directory, a FIFO (must not hang), a
	// device.
	must(os.MkdirAll(filepath.Join(bad, "dirtoml", "stem.toml"), 0o755))
	must(os.MkdirAll(filepath.Join(bad, "fifo"), 0o755))
	must(syscall.Mkfifo(filepath.Join(bad, "fifo", "stem.toml"), 0o644))
	must(os.MkdirAll(filepath.Join(bad, "devtoml"), 0o755))
	must(syscall.Mknod(filepath.Join(bad, "devtoml", "stem.toml"), syscall.S_IFCHR|0o644, int(unix.Mkdev(1, 5))))
	// A manifest linked to a host file (a valid one, so only the link
	// itself can be the reason for the refusal).
	must(os.MkdirAll(filepath.Join(bad, "linktoml"), 0o755))
	must(os.WriteFile(filepath.Join(outside, "host.toml"), []byte(good("")), 0o600))
	must(os.Symlink(filepath.Join(outside, "host.toml"), filepath.Join(bad, "linktoml", "stem.toml")))
	// A card and a series that live outside the workspace.
	must(os.MkdirAll(filepath.Join(outside, "card"), 0o755))
	must(os.WriteFile(filepath.Join(outside, "card", "stem.toml"), []byte(good("")), 0o644))
	must(os.Symlink(filepath.Join(outside, "card"), filepath.Join(ws, "demo", "linked")))
	must(os.Symlink(outside, filepath.Join(ws, "elsewhere")))
	return outside
}

// TestBadInputChangesNothing attacks stemctl's arguments, environment and
// the workspace's content the way a careless user or a hostile repository
// would. Each attempt must end with one clear line and a non-zero exit, and
// together they must leave no container, record, socket directory or file.
func TestBadInputChangesNothing(t *testing.T) {
	a := newAccount(t)
	a.must(0, "list", "--json") // the registry exists before the snapshot
	ws, err := filepath.EvalSymlinks(a.WS)
	if err != nil {
		t.Fatal(err)
	}
	outside := hostileCards(t, ws)
	canary := filepath.Join(t.TempDir(), "canary")
	base := t.TempDir()
	notDir := filepath.Join(base, "file")
	os.WriteFile(notDir, nil, 0o644)
	loop := filepath.Join(base, "loop")
	os.Symlink(loop+"2", loop)
	os.Symlink(loop, loop+"2")
	passwd := filepath.Join(base, "passwd")
	os.Symlink("/etc/passwd", passwd)
	spaced := filepath.Join(base, "my work space")
	os.MkdirAll(spaced, 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join(ws, "demo"), spaced+"/").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	// Runtime directories stemctl must refuse before making anything:
	// socket paths over the limit, group-readable, a file. Podman is
	// reached as usual (not through the fake runtime directory).
	host := os.Getenv("CONTAINER_HOST")
	if host == "" && os.Geteuid() == 0 {
		host = "unix:///run/podman/podman.sock"
	} else if host == "" {
		host = "unix://" + filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "podman", "podman.sock")
	}
	// Short paths (not t.TempDir's), so only the fault under test is wrong.
	rtBase, err := os.MkdirTemp("/tmp", "bi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rtBase) })
	longRT := filepath.Join(rtBase, strings.Repeat("r", 90))
	openRT := filepath.Join(rtBase, "open")
	fileRT := filepath.Join(rtBase, "file")
	os.WriteFile(fileRT, nil, 0o644)
	os.MkdirAll(longRT, 0o700)
	os.MkdirAll(openRT, 0o755)
	os.Chmod(openRT, 0o755)
	rtEnv := func(dir string) []string { return []string{"XDG_RUNTIME_DIR=" + dir, "CONTAINER_HOST=" + host} }

	const inst = "native-amd64-demo-hello-t1"
	long := strings.Repeat("a", 5000)
	cases := []badCase{
		// Names: paths, separators, whitespace, shell text, unicode, empty,
		// very long, leading '-'.
		{args: []string{"up", "native-amd64", "demo", "../hello", "1"}, code: 1, want: []string{`unknown card "../hello"`, "cards: "}},
		{args: []string{"up", "native-amd64", "../demo", "hello", "1"}, code: 1, want: []string{`unknown series "../demo"`}},
		{args: []string{"up", "native-amd64", "demo/hello", "x", "1"}, code: 1, want: []string{`unknown series "demo/hello"`}},
		{args: []string{"up", "native-amd64", "demo hello", "hello", "1"}, code: 1, want: []string{`unknown series "demo hello"`}},
		{args: []string{"up", "native-amd64", "demo\nhello", "hello", "1"}, code: 1, want: []string{`unknown series "demo\nhello"`}},
		{args: []string{"up", "native-amd64", "demo", "hello", "1; touch " + canary}, code: 1, want: []string{"unknown task", "tasks: 1, 2, 3"}},
		{args: []string{"up", "native-amd64", "demo", "hello", "$(touch " + canary + ")"}, code: 1, want: []string{"unknown task"}},
		{args: []string{"up", "native-amd64", "demo", "`touch " + canary + "`", "1"}, code: 1, want: []string{"unknown card"}},
		{args: []string{"up", "native-amd64", "demo", "héllo", "1"}, code: 1, want: []string{`did you mean "hello"`}},
		{args: []string{"up", "native-amd64", "demo", long, "1"}, code: 1, want: []string{"unknown card", "(5000 bytes)"}},
		{args: []string{"up", "native-amd64", "demo", "hello", ""}, code: 1, want: []string{`unknown task ""`}},
		{args: []string{"up", "native-amd64", "", "hello", "1"}, code: 1, want: []string{`unknown series ""`}},
		// An empty PROFILE (an unset variable) is not "the task's default".
		{args: []string{"up", "", "demo", "hello", "1"}, code: 1, want: []string{`unknown profile ""`, "native-amd64"}},
		{args: []string{"up", "../native-amd64", "demo", "hello", "1"}, code: 1, want: []string{`unknown profile "../native-amd64"`}},
		{args: []string{"up", "native-amd64", "demo", "hello", "-1"}, code: 2, want: []string{"-1", "goes after --"}},
		{args: []string{"up", "--", "native-amd64", "demo", "hello", "-1"}, code: 1, want: []string{`unknown task "-1"`}},
		{args: []string{"list", "--json=maybe"}, code: 2, want: []string{"want true or false"}},
		{args: []string{"debug", "native-amd64", "demo", "../hello", "1"}, code: 1, want: []string{"unknown card"}},
		{args: []string{"build", "native-amd64", "demo", "hello", "1;id"}, code: 1, want: []string{"unknown task"}},
		// Targets and devices.
		{args: []string{"up", "native-amd64", "demo", "hello", "1", "--target", "rp2350-arm"}, code: 1, want: []string{`unknown target "rp2350-arm"`, "amd64"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--target", "../rp2350-rv"}, code: 1, want: []string{"unknown target", "rp2350-arm"}},
		{args: []string{"up", "native-amd64", "demo", "hello", "1", "--device", "/dev/null"}, code: 1, want: []string{"takes no devices"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--device", "/etc/passwd"}, code: 1, want: []string{"not under /dev"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--device", passwd}, code: 1, want: []string{"resolves to /etc/passwd", "not under /dev"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--device", "dev/ttyACM0"}, code: 1, want: []string{"absolute path"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--device", "/dev/stem-no-such-board"}, code: 1, want: []string{"does not exist", "plugged in"}},
		{args: []string{"up", "rp2350", "demo", "hello", "3", "--device", "/dev/shm"}, code: 1, want: []string{"not a character device"}},
		// Verbs the task lacks create nothing on the way to refusing.
		{args: []string{"deploy", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"declares no deploy command"}},
		{args: []string{"deploy", "rp2350", "demo", "hello", "3", "--target", "rp2350-rv"}, code: 1, want: []string{"no device was passed", "--device"}},
		// Instances that do not exist or look like paths.
		{args: []string{"status", "../../etc/passwd"}, code: 1, want: []string{"no such instance"}},
		{args: []string{"status", "nope", "--json"}, code: 1, want: []string{"no such instance", "stemctl up"}},
		{args: []string{"status", ""}, code: 1, want: []string{"no such instance"}},
		{args: []string{"exec", "/tmp", "--", "true"}, code: 1, want: []string{"no such instance"}},
		{args: []string{"build", inst}, code: 1, want: []string{"no such instance"}},
		{args: []string{"rm", inst + "/../x"}, code: 1, want: []string{"no such instance"}},
		{args: []string{"down", "nope"}, code: 1, want: []string{"no such instance"}},
		// exec without a command.
		{args: []string{"exec", inst}, code: 2, want: []string{"needs --"}},
		{args: []string{"exec", inst, "--"}, code: 2, want: []string{"no command after --"}},
		{args: []string{"exec", inst, "--", ""}, code: 2, want: []string{"COMMAND is empty"}},
		{args: []string{"exec", inst, "extra", "--", "true"}, code: 2, want: []string{"one INSTANCE"}},
		{args: []string{"exec", inst, "-w", "relative", "--", "true"}, code: 2, want: []string{"absolute path"}},
		{args: []string{"exec", inst, "-e", "NOEQUALS", "--", "true"}, code: 2, want: []string{"NAME=VALUE"}},
		// The workspace.
		{env: []string{"STEM_WORKSPACE=" + filepath.Join(base, "missing")}, args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"does not exist", "STEM_WORKSPACE"}},
		{env: []string{"STEM_WORKSPACE=" + notDir}, args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"not a directory", "STEM_WORKSPACE"}},
		{env: []string{"STEM_WORKSPACE=" + filepath.Join(notDir, "ws")}, args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"not a directory", "STEM_WORKSPACE"}},
		{env: []string{"STEM_WORKSPACE=" + loop}, args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"symlink loop", "STEM_WORKSPACE"}},
		{args: []string{"up", "native-amd64", "demo", "linked", "1"}, code: 1, want: []string{"demo/linked is a symlink", "inside the workspace"}},
		{args: []string{"up", "native-amd64", "elsewhere", "card", "1"}, code: 1, want: []string{"series elsewhere is a symlink"}},
		// Card manifests.
		{args: []string{"up", "native-amd64", "bad", "malformed", "1"}, code: 1, want: []string{"bad/malformed/stem.toml", "line ", "docs/manifest.md"}},
		{args: []string{"up", "native-amd64", "bad", "types", "1"}, code: 1, want: []string{"schema must be a number"}},
		{args: []string{"up", "native-amd64", "bad", "notlist", "1"}, code: 1, want: []string{"profiles must be a list"}},
		{args: []string{"up", "native-amd64", "bad", "unknown", "1"}, code: 1, want: []string{"unknown key", "colour", "tasks.comand"}},
		{args: []string{"up", "native-amd64", "bad", "badprofile", "1"}, code: 1, want: []string{`unknown profile "x86"`}},
		{args: []string{"up", "native-amd64", "bad", "badid", "1"}, code: 1, want: []string{"id", "lower-case"}},
		{args: []string{"up", "native-amd64", "bad", "updir", "1"}, code: 1, want: []string{"inside the card"}},
		{args: []string{"up", "native-amd64", "bad", "absdir", "1"}, code: 1, want: []string{"inside the card"}},
		{args: []string{"up", "native-amd64", "bad", "linkdir", "1"}, code: 1, want: []string{`dir "out" leads out of the card`, "/etc"}},
		{args: []string{"up", "native-amd64", "bad", "nodir", "1"}, code: 1, want: []string{`dir "missing" does not exist`}},
		{args: []string{"up", "native-amd64", "bad", "filedir", "1"}, code: 1, want: []string{`dir "f" is not a directory`}},
		{args: []string{"up", "native-amd64", "bad", "huge", "1"}, code: 1, want: []string{"larger than"}},
		{args: []string{"up", "native-amd64", "bad", "binary", "1"}, code: 1, want: []string{"bad/binary/stem.toml", "UTF-8"}},
		{args: []string{"up", "native-amd64", "bad", "empty", "1"}, code: 1, want: []string{"schema = 0 is not supported"}},
		{args: []string{"up", "native-amd64", "bad", "dirtoml", "1"}, code: 1, want: []string{"not a regular file", "directory"}},
		{args: []string{"up", "native-amd64", "bad", "devtoml", "1"}, code: 1, want: []string{"not a regular file", "device"}},
		{args: []string{"up", "native-amd64", "bad", "linktoml", "1"}, code: 1, want: []string{"stem.toml is a symlink", "replace it with the file"}},
		{args: []string{"build", "native-amd64", "bad", "linkdir", "1", "--print"}, code: 1, want: []string{"leads out of the card"}},
		// The repository must not redirect stem's writes.
		{args: []string{"up", "native-amd64", "bad", "gitlink", "1"}, code: 1, want: []string{".git is a symlink", "stem needs a directory"}},
		{args: []string{"up", "native-amd64", "bad", "statelink", "1"}, code: 1, want: []string{".stem is a symlink", "remove it"}},
		// Runtime directories stemctl must not use.
		{env: rtEnv(longRT), args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"100-byte limit", "shorter XDG_RUNTIME_DIR"}},
		{env: rtEnv(openRT), args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"must be 0700", "chmod 700"}},
		{env: rtEnv(fileRT), args: []string{"up", "native-amd64", "demo", "hello", "1"}, code: 1, want: []string{"not a directory"}},
	}

	before := map[string]string{"workspace": snapshot(t, ws), "outside": snapshot(t, outside), "runtime": snapshot(t, a.Runtime),
		"state": withoutLocks(snapshot(t, filepath.Join(a.Base, "state"))), "long runtime": snapshot(t, longRT), "open runtime": snapshot(t, openRT)}
	start := time.Now()
	for _, c := range cases {
		a.checkBad(c)
	}

	// A FIFO as stem.toml must not hang stemctl (a blocked open ignores
	// SIGTERM, so the bound here is a kill).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(a.Bin, "stemctl"), "up", "native-amd64", "bad", "fifo", "1")
	cmd.Env = a.Env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatal("stemctl hung on a FIFO named stem.toml")
	}
	fr := result{Stdout: so.String(), Stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		fr.Code = ee.ExitCode()
	}
	checkResult(t, badCase{args: []string{"up", "native-amd64", "bad", "fifo", "1"}, code: 1, want: []string{"not a regular file", "named pipe"}}, fr)
	t.Logf("%d refusals in %s", len(cases)+1, time.Since(start).Round(time.Millisecond))

	// A workspace path with spaces is not bad input: it resolves.
	r := a.must(0, "build", "native-amd64", "demo", "hello", "1", "--print")
	if strings.TrimSpace(r.Stdout) != "make" {
		t.Fatalf("build --print: %q", r.Stdout)
	}
	r, _ = a.Run([]string{"STEM_WORKSPACE=" + spaced}, "build", "native-amd64", "demo", "hello", "1", "--print")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "make" {
		t.Fatalf("a workspace with spaces in its path: exit %d %q %s", r.Code, r.Stdout, r.Stderr)
	}

	// Nothing changed: no container, no record, no file.
	out, err := exec.Command("podman", "ps", "-a", "--filter", "label=io.stem.workspace="+ws, "--format", "{{.Names}}").CombinedOutput()
	if err != nil {
		t.Fatalf("podman ps: %v %s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("bad input left containers: %s", s)
	}
	if r := a.must(0, "list", "--json"); strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("bad input left instances: %s", r.Stdout)
	}
	after := map[string]string{"workspace": snapshot(t, ws), "outside": snapshot(t, outside), "runtime": snapshot(t, a.Runtime),
		"state": withoutLocks(snapshot(t, filepath.Join(a.Base, "state"))), "long runtime": snapshot(t, longRT), "open runtime": snapshot(t, openRT)}
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("bad input changed the %s directory:\nbefore:\n%s\nafter:\n%s", k, before[k], after[k])
		}
	}
	if _, err := os.Lstat(canary); err == nil {
		t.Error("a name was run as shell text: the canary exists")
	}
}
