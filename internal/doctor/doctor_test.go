package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestAllFine(t *testing.T) {
	e, fe := fakeEnv(t)
	writeFile(t, filepath.Join(e.LingerDir, "stu"), "")
	writeFile(t, filepath.Join(e.CgroupRoot, "user.slice", "user-"+itoa(e.UID)+".slice", "user@"+itoa(e.UID)+".service", "cgroup.controllers"), "cpuset cpu io memory pids\n")
	rs := Run(context.Background(), e)
	for _, r := range rs {
		if r.Status != OK {
			t.Errorf("%s: %s %s (fix %q)", r.Name, r.Status, r.Detail, r.Fix)
		}
	}
	if Failed(rs) {
		t.Error("Failed says a requirement failed")
	}
	// The runtime check started one container, on the account's ids, and
	// removed it.
	if len(fe.created) != 1 || fe.created[0].IDMap == nil || fe.created[0].IDMap.Base != 1 || fe.created[0].IDMap.Size != 65536 {
		t.Fatalf("created %+v, want one container on ids 1+65536", fe.created)
	}
	if len(fe.removed) != 1 {
		t.Errorf("removed %v, want the runtime check's container", fe.removed)
	}
	if d := find(t, rs, "subordinate-ids").Detail; !strings.Contains(d, "165536-231071") {
		t.Errorf("subordinate-ids detail %q does not name the range", d)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSubIDs(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		e, _ := fakeEnv(t)
		writeFile(t, e.SubIDs.SubUID, "other:100000:65536\n")
		writeFile(t, e.SubIDs.SubGID, "other:100000:65536\n")
		r := checkSubIDs(e)
		// The fix gives a range next to the other account's, not over it.
		if r.Status != Fail || !r.Required || !strings.Contains(r.Fix, "usermod --add-subuids 196608-262143 --add-subgids 196608-262143 stu") {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("overlap", func(t *testing.T) {
		e, _ := fakeEnv(t)
		writeFile(t, e.SubIDs.SubGID, "other:100000:65536\nstu:150000:65536\n")
		r := checkSubIDs(e)
		if r.Status != Fail || !strings.Contains(r.Detail, "overlaps other's") || !strings.Contains(r.Fix, "--del-subuids 150000-215535") {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("short", func(t *testing.T) {
		e, _ := fakeEnv(t)
		writeFile(t, e.SubIDs.SubUID, "stu:165536:1000\n")
		if r := checkSubIDs(e); r.Status != Warn || !strings.Contains(r.Detail, "only 1000 ids") {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("root", func(t *testing.T) {
		e, _ := fakeEnv(t)
		e.UID = 0
		os.Remove(e.SubIDs.SubUID)
		if r := checkSubIDs(e); r.Status != OK || !strings.Contains(r.Detail, "2000000000") {
			t.Fatalf("got %+v", r)
		}
	})
}

func TestRuntimeDir(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkRuntimeDir(e); r.Status != OK {
		t.Fatalf("control: %+v", r)
	}
	os.Chmod(e.Runtime, 0o711)
	if r := checkRuntimeDir(e); r.Status != OK {
		t.Fatalf("mode 0711 (rootless Podman's): %+v", r)
	}
	os.Chmod(e.Runtime, 0o755)
	if r := checkRuntimeDir(e); r.Status != Fail || r.Fix != "chmod go-rw "+e.Runtime {
		t.Fatalf("mode 0755: %+v", r)
	}
	e.UID++
	if r := checkRuntimeDir(e); r.Status != Fail || !strings.Contains(r.Detail, "belongs to uid") || !strings.Contains(r.Fix, "chown") {
		t.Fatalf("another's: %+v", r)
	}
	e.Runtime += "-missing"
	r := checkRuntimeDir(e)
	if r.Status != Fail || !r.Required || !strings.HasPrefix(r.Fix, "(as root) install -d -m 0700 -o stu") {
		t.Fatalf("missing: %+v", r)
	}
}

func TestLinger(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkLinger(e); r.Status != Warn || !strings.Contains(r.Fix, "/etc/tmpfiles.d/stem-stu.conf") {
		t.Fatalf("no logind: %+v", r)
	}
	e.TmpfilesDir = t.TempDir()
	// A line for another directory does not count; the account's does.
	writeFile(t, TmpfilesPath(e.TmpfilesDir, "stu"), "d /run/user/4242 0700 stu 1000 -\n")
	if r := checkLinger(e); r.Status != Warn {
		t.Fatalf("a tmpfiles line for another directory: %+v", r)
	}
	writeFile(t, TmpfilesPath(e.TmpfilesDir, "stu"), "d "+e.Runtime+" 0700 stu 1000 -\n")
	if r := checkLinger(e); r.Status != OK || !strings.Contains(r.Detail, "tmpfiles.d") {
		t.Fatalf("a tmpfiles line: %+v", r)
	}
	os.Remove(TmpfilesPath(e.TmpfilesDir, "stu"))
	os.Mkdir(e.SystemdDir, 0o755)
	if r := checkLinger(e); r.Status != Warn || r.Fix != "(as root) loginctl enable-linger stu" {
		t.Fatalf("logind without linger: %+v", r)
	}
	writeFile(t, filepath.Join(e.LingerDir, "stu"), "")
	if r := checkLinger(e); r.Status != OK {
		t.Fatalf("linger: %+v", r)
	}
}

func TestACL(t *testing.T) {
	e, _ := fakeEnv(t)
	r := checkACL("acl-workspace", e.Workspace, e)
	if r.Status != OK {
		t.Fatalf("%+v (the test's temporary directory needs a file system with ACLs)", r)
	}
	// The temporary file is gone.
	if left, _ := filepath.Glob(filepath.Join(e.Workspace, ".stem-doctor-acl-*")); len(left) > 0 {
		t.Errorf("left %v", left)
	}
	if r := checkACL("acl-workspace", filepath.Join(e.Home, "nowhere"), e); r.Status != Fail || r.Fix != "see workspace" {
		t.Fatalf("missing dir: %+v", r)
	}
}

func TestStorageAndCgroups(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkStorage(e, info{Driver: "vfs"}); r.Status != Warn || !strings.Contains(r.Fix, `driver = "overlay"`) {
		t.Fatalf("vfs: %+v", r)
	}
	if r := checkCgroups(e, info{Cgroups: "v1"}); r.Status != Warn || !strings.Contains(r.Detail, "ignores") {
		t.Fatalf("rootless v1: %+v", r)
	}
	if r := checkCgroups(e, info{Cgroups: "v2"}); r.Status != Warn || !strings.Contains(r.Detail, "memory, pids, cpu not delegated") {
		t.Fatalf("rootless v2 without delegation: %+v", r)
	}
	e.UID = 0
	if r := checkCgroups(e, info{Cgroups: "v1"}); r.Status != OK {
		t.Fatalf("root: %+v", r)
	}
}

func TestImages(t *testing.T) {
	e, fe := fakeEnv(t)
	delete(fe.images, "localhost/stem-rp2350:latest")
	delete(fe.images, "localhost/stem-agent:latest")
	rs := Run(context.Background(), e)
	if r := find(t, rs, "image rp2350"); r.Status != Warn || r.Required || !strings.Contains(r.Fix, "podman load -i /var/tmp/stem-rp2350.tar") {
		t.Errorf("one profile missing: %+v", r)
	}
	if r := find(t, rs, "image agent"); r.Status != Warn || !strings.Contains(r.Detail, "agent start") {
		t.Errorf("agent missing: %+v", r)
	}
	if Failed(rs) {
		t.Error("a profile image is present, yet Failed")
	}
	fe.images["localhost/stem-native-amd64:latest"] = stemImage("io.stem.profile", "rp2350")
	if r := find(t, Run(context.Background(), e), "image native-amd64"); r.Status != Warn || !strings.Contains(r.Detail, "not a stem image") {
		t.Errorf("wrong label: %+v", r)
	}
	delete(fe.images, "localhost/stem-native-amd64:latest")
	e.UID = 0 // root builds images rather than loading them
	fe.created = nil
	rs = Run(context.Background(), e)
	if r := find(t, rs, "image native-amd64"); r.Status != Fail || !r.Required || !strings.HasPrefix(r.Fix, "make images") {
		t.Errorf("no image: %+v", r)
	}
	if r := find(t, rs, "runtime"); r.Status != Warn || len(fe.created) != 0 {
		t.Errorf("runtime without images: %+v (created %v)", r, fe.created)
	}
	if !Failed(rs) {
		t.Error("no profile image, yet not Failed")
	}
}

func TestRuntime(t *testing.T) {
	e, fe := fakeEnv(t)
	fe.startErr = errors.New("OCI runtime error: crun: cgroups in hybrid mode not supported\n  hint: crun cannot run containers on this host")
	rs := Run(context.Background(), e)
	r := find(t, rs, "runtime")
	if r.Status != Fail || !r.Required || r.Fix != "crun cannot run containers on this host" || strings.Contains(r.Detail, "hint") {
		t.Fatalf("start refused: %+v", r)
	}
	if len(fe.removed) != 1 {
		t.Errorf("the created container was not removed: %v", fe.removed)
	}
	if !Failed(rs) {
		t.Error("runtime failed, yet not Failed")
	}
}

func TestServiceDown(t *testing.T) {
	e, _ := fakeEnv(t)
	e.Connect = func(context.Context) (Engine, Service, error) {
		return nil, Service{}, errors.New("no Podman service answers at unix:///x.sock")
	}
	rs := Run(context.Background(), e)
	if r := find(t, rs, "podman-service"); r.Status != Fail || !strings.Contains(r.Detail, "unix:///x.sock") || r.Fix == "" {
		t.Fatalf("%+v", r)
	}
	if r := find(t, rs, "image agent"); r.Status != Fail || r.Fix != "see podman-service" {
		t.Fatalf("images without a service: %+v", r)
	}
	if !Failed(rs) {
		t.Error("not Failed")
	}
}

func TestNotInstalled(t *testing.T) {
	e, _ := fakeEnv(t)
	e.LookPath = func(p string) (string, error) { return "", errors.New("not found") }
	rs := Run(context.Background(), e)
	if r := find(t, rs, "podman"); r.Status != Fail || !strings.Contains(r.Fix, "apt-get install podman") {
		t.Fatalf("%+v", r)
	}
	if r := find(t, rs, "git-identity"); r.Status != Warn || !strings.Contains(r.Fix, "apt-get install git") {
		t.Fatalf("%+v", r)
	}
}

func TestWorkspaceAndGit(t *testing.T) {
	e, _ := fakeEnv(t)
	writeFile(t, filepath.Join(e.Workspace, "demo", "broken", "stem.toml"), "schema = [\n")
	if r := checkWorkspace(e); r.Status != Warn || !strings.Contains(r.Detail, "demo/broken") {
		t.Fatalf("a broken card: %+v", r)
	}
	os.RemoveAll(filepath.Join(e.Workspace, "demo"))
	if r := checkWorkspace(e); r.Status != Fail || !strings.Contains(r.Detail, "no cards") {
		t.Fatalf("no cards: %+v", r)
	}
	e.Workspace += "-missing"
	if r := checkWorkspace(e); r.Status != Fail || !strings.HasPrefix(r.Fix, "mkdir -p "+e.Workspace) {
		t.Fatalf("missing: %+v", r)
	}
	e.Output = func(context.Context, string, ...string) (string, error) { return "", errors.New("exit status 1") }
	if r := checkGit(context.Background(), e); r.Status != Warn || !strings.Contains(r.Fix, "git config --global user.name") {
		t.Fatalf("no identity: %+v", r)
	}
}

func TestStorageOverlay(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkStorage(e, info{Driver: "overlay"}); r.Status != OK || r.Fix != "" {
		t.Fatalf("overlay: %+v", r)
	}
	// podman info failing leaves the driver unknown: a warning, not OK.
	e.Output = func(context.Context, string, ...string) (string, error) { return "", errors.New("exit status 125") }
	if r := find(t, Run(context.Background(), e), "storage-driver"); r.Status != Warn || !strings.Contains(r.Detail, "unknown") {
		t.Fatalf("podman info failing: %+v", r)
	}
}

// TestSSHD: sshd on PATH or in its usual place passes; neither is a
// warning naming the package (teacher access alone needs it).
func TestSSHD(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkSSHD(e); r.Status != OK || !strings.Contains(r.Detail, "/usr/bin/sshd") {
		t.Fatalf("on PATH: %+v", r)
	}
	e.LookPath = func(p string) (string, error) {
		if p == "sshd" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + p, nil
	}
	e.SSHD = filepath.Join(e.Home, "sbin", "sshd")
	writeFile(t, e.SSHD, "")
	if r := checkSSHD(e); r.Status != OK || !strings.Contains(r.Detail, e.SSHD) {
		t.Fatalf("outside PATH: %+v", r)
	}
	os.Remove(e.SSHD)
	rs := Run(context.Background(), e)
	r := find(t, rs, "sshd")
	if r.Status != Warn || r.Required || r.Fix != "(as root) apt-get install openssh-server" || !strings.Contains(r.Detail, "teacher") {
		t.Fatalf("missing: %+v", r)
	}
	if Failed(rs) {
		t.Error("no sshd failed the account: only a teacher's access needs it")
	}
}

// TestMCPMissing: without stem-mcp the account is not ready, and the fix
// says how to get it.
func TestMCPMissing(t *testing.T) {
	e, _ := fakeEnv(t)
	if r := checkMCP(e); r.Status != OK || r.Detail != "/usr/bin/stem-mcp" {
		t.Fatalf("control: %+v", r)
	}
	e.MCP = func() (string, error) { return "", errors.New("stem-mcp not found beside /usr/local/bin/stemctl") }
	rs := Run(context.Background(), e)
	r := find(t, rs, "stem-mcp")
	if r.Status != Fail || !r.Required || !strings.Contains(r.Detail, "not found") || !strings.HasPrefix(r.Fix, "make build") {
		t.Fatalf("missing: %+v", r)
	}
	if !Failed(rs) {
		t.Error("no stem-mcp, yet not Failed")
	}
}
