// Package student is a test fixture: a real non-root account with its own
// rootless Podman and stem's images, for running the built stemctl the way
// a student in a lab does. Making it needs root (CI runs as root).
//
// Usage:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		student.Remove()
//		testenv.RemoveBinaries()
//		os.Exit(code)
//	}
//
//	s := student.Get(t, "localhost/stem-native-amd64:latest")
//	a := s.Account(t, binDir) // a *testenv.Account whose Run and Command run as the student
//	a.Run(nil, "up", "native-amd64", "demo", "hello", "1")
//
// Get makes one account per test process (useradd, with subordinate ids
// for rootless Podman, a password-less login, /run/user/UID), gives it the
// Podman configuration a student would write (~/.config/containers:
// storage.conf with the overlay driver storing images as the ids of stem's
// containers, and a copy of $CONTAINERS_CONF as
// containers.conf when the host needs one) and loads each image it is
// asked for into the account's own storage. NewManyShared makes accounts
// that read the images from one shared store instead, as the accounts of
// `stemctl lab` do: a class costs one image load, not one per student.
// Accounts and stores left by a test process that died are removed by
// the next one.
package student

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/doctor"
	"github.com/stem-edu/stem/internal/idmap"
	"github.com/stem-edu/stem/internal/lab"
	"github.com/stem-edu/stem/internal/lib/procstat"
	"github.com/stem-edu/stem/internal/testenv"
)

// Prefix starts the name of every account this package makes.
const Prefix = testenv.AccountPrefix

// Student is a non-root account with rootless Podman.
type Student struct {
	Name     string
	UID, GID int
	Home     string
	// Runtime is the account's XDG_RUNTIME_DIR, /run/user/UID: rootless
	// Podman keeps its run state and its API socket there.
	Runtime string

	mu     sync.Mutex
	images map[string]bool   // loaded, by image id
	bins   map[string]string // the student's copy of a binaries directory
}

// the process's account; test fixtures are made once per process (as
// testenv.Binary's binaries are).
var shared struct {
	mu sync.Mutex
	s  *Student
}

// Get returns this test process's student account, making it on first
// use, with every image of images in its Podman storage.
func Get(t testing.TB, images ...string) *Student {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s == nil {
		s, err := create()
		if err != nil {
			t.Fatalf("student account: %v", err)
		}
		shared.s = s
	}
	for _, img := range images {
		if err := shared.s.load(img); err != nil {
			t.Fatalf("student account %s: %v", shared.s.Name, err)
		}
	}
	return shared.s
}

// New makes another account, for a test that needs several students (a
// class), with every image of images in its Podman storage. It is removed
// when the test ends.
func New(t testing.TB, images ...string) *Student {
	t.Helper()
	s, err := create()
	if err != nil {
		t.Fatalf("student account: %v", err)
	}
	t.Cleanup(s.remove)
	for _, img := range images {
		if err := s.load(img); err != nil {
			t.Fatalf("student account %s: %v", s.Name, err)
		}
	}
	return s
}

// NewMany makes n accounts as New does, with no image, and removes them
// side by side when the test ends (each removal mostly waits: for its
// processes to go, for userdel to delete a home full of image layers).
func NewMany(t testing.TB, n int) []*Student {
	t.Helper()
	ss := make([]*Student, 0, n)
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.remove()
			}()
		}
		wg.Wait()
	})
	// useradd takes the passwd lock: one account at a time.
	for range n {
		s, err := create()
		if err != nil {
			t.Fatalf("student account: %v", err)
		}
		ss = append(ss, s)
	}
	return ss
}

// Load puts images into the account's Podman storage (for accounts made
// with New concurrently: each load is the student's own podman).
func (s *Student) Load(images ...string) error {
	for _, img := range images {
		if err := s.load(img); err != nil {
			return fmt.Errorf("student account %s: %w", s.Name, err)
		}
	}
	return nil
}

// Remove stops everything the process's student account runs and deletes
// the account with its home. Call it from TestMain after m.Run.
func Remove() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s != nil {
		shared.s.remove()
		shared.s = nil
	}
	removeStore()
}

func create() (*Student, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("making a test account needs root (CI runs as root)")
	}
	for _, p := range []string{"useradd", "userdel", "newuidmap", "newgidmap", "podman"} {
		if _, err := exec.LookPath(p); err != nil {
			return nil, fmt.Errorf("%s is not installed (apt-get install passwd uidmap podman, or run `make setup`)", p)
		}
	}
	sweep()
	b := make([]byte, 4)
	rand.Read(b)
	name := Prefix + hex.EncodeToString(b)
	if err := Passwd("useradd", "-m", "-s", "/bin/bash", "-c", tag(), name); err != nil {
		return nil, err
	}
	s := &Student{Name: name, images: map[string]bool{}, bins: map[string]string{}}
	u, err := user.Lookup(name)
	if err != nil {
		s.remove()
		return nil, err
	}
	s.UID, _ = strconv.Atoi(u.Uid)
	s.GID, _ = strconv.Atoi(u.Gid)
	s.Home = u.HomeDir
	s.Runtime = fmt.Sprintf("/run/user/%d", s.UID)
	if err := s.setup(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// setup gives the account what a student sets up once (docs/install.md):
// subordinate ids, a runtime directory, Podman's configuration, a git
// identity.
func (s *Student) setup() error {
	// sshd refuses a locked account (what useradd leaves) without PAM.
	if err := Passwd("usermod", "-p", "*", s.Name); err != nil {
		return err
	}
	if _, ok := subRange("/etc/subuid", s.Name); !ok {
		return fmt.Errorf("useradd gave %s no range in /etc/subuid (SUB_UID_COUNT in /etc/login.defs?)", s.Name)
	}
	if err := os.MkdirAll(s.Runtime, 0o700); err != nil {
		return err
	}
	m, err := idmap.Rootless(idmap.DefaultFiles, s.Name, strconv.Itoa(s.UID))
	if err != nil {
		return err
	}
	files := map[string]string{
		".config/containers/storage.conf": doctor.OwnStorageConf(m),
		".gitconfig":                      "[user]\n\tname = Test Student\n\temail = student@example.org\n[init]\n\tdefaultBranch = main\n",
	}
	if cc := os.Getenv("CONTAINERS_CONF"); cc != "" {
		data, err := os.ReadFile(cc)
		if err != nil {
			return fmt.Errorf("CONTAINERS_CONF: %w", err)
		}
		files[".config/containers/containers.conf"] = string(data)
	}
	for rel, data := range files {
		p := filepath.Join(s.Home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return s.chown(s.Runtime, s.Home)
}

// chown gives paths (recursively) to the student.
func (s *Student) chown(paths ...string) error {
	for _, p := range paths {
		if err := run(nil, "chown", "-R", fmt.Sprintf("%d:%d", s.UID, s.GID), p); err != nil {
			return err
		}
	}
	return nil
}

// Cred runs a process as the student, with no supplementary group.
func (s *Student) Cred() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}
}

// Env is the login environment of the student (no CONTAINERS_CONF: the
// account has its own containers.conf).
func (s *Student) Env() []string {
	return []string{"HOME=" + s.Home, "USER=" + s.Name, "LOGNAME=" + s.Name, "PATH=" + os.Getenv("PATH"),
		"XDG_RUNTIME_DIR=" + s.Runtime, "LANG=C.UTF-8", "TERM=xterm-256color"}
}

// Command runs name as the student with Env.
func (s *Student) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.Env()
	cmd.Dir = s.Home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.Cred()}
	return cmd
}

// tag marks an account with the process that made it (its GECOS field),
// so a later process can tell whether its maker is gone.
func tag() string {
	return fmt.Sprintf("stem test pid=%d start=%s", os.Getpid(), startTime(os.Getpid()))
}

// makerGone reports whether the test process a tag names has ended (not
// for what is no tag of this package's).
func makerGone(tag string) bool {
	var pid int
	var start string
	if _, err := fmt.Sscanf(tag, "stem test pid=%d start=%s", &pid, &start); err != nil {
		return false
	}
	return start == "" || startTime(pid) != start
}

// startTime is pid's start time, "" when it is gone: a pid reused later
// differs.
func startTime(pid int) string {
	st, err := procstat.Start(pid)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(st, 10)
}

// sweep removes accounts of this package whose maker is no longer running.
func sweep() {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || !strings.HasPrefix(f[0], Prefix) {
			continue
		}
		if !makerGone(f[4]) {
			continue
		}
		uid, _ := strconv.Atoi(f[2])
		gid, _ := strconv.Atoi(f[3])
		(&Student{Name: f[0], UID: uid, GID: gid, Home: f[5], Runtime: fmt.Sprintf("/run/user/%d", uid)}).remove()
	}
}

// remove kills every process of the account (and of its subordinate
// ids: container processes) by pid, then deletes the account, its home
// and its runtime directory.
func (s *Student) remove() {
	if s.UID > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		s.Command(ctx, "podman", "rm", "-a", "-f", "-t", "0").Run()
		cancel()
		sub, ok := subRange("/etc/subuid", s.Name)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			pids := processes(func(uid int) bool { return uid == s.UID || (ok && uid >= sub[0] && uid < sub[0]+sub[1]) })
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	Passwd("userdel", "-r", s.Name)
	if s.UID > 0 {
		os.RemoveAll(fmt.Sprintf("/run/user/%d", s.UID))
		lab.RemoveOwned(s.UID, lab.PodmanTempDirs(s.UID)...)
	}
	for _, d := range s.bins {
		os.RemoveAll(d)
	}
}

// subRange is the name's first range in an /etc/subuid-style file.
func subRange(file, name string) ([2]int, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return [2]int{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 3 && f[0] == name {
			a, e1 := strconv.Atoi(f[1])
			b, e2 := strconv.Atoi(f[2])
			if e1 == nil && e2 == nil {
				return [2]int{a, b}, true
			}
		}
	}
	return [2]int{}, false
}

// processes lists the pids whose real uid passes keep.
func processes(keep func(uid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if uid, err := strconv.Atoi(f[0]); err == nil && keep(uid) {
						out = append(out, pid)
					}
				}
				break
			}
		}
	}
	return out
}

// Passwd runs a command that edits /etc/passwd (useradd, usermod, ...).
// Other test processes on the machine add and remove accounts too, and
// these commands give up at once when another holds the lock: try again
// while that is the reason.
func Passwd(name string, args ...string) error {
	delay := 50 * time.Millisecond
	for deadline := time.Now().Add(time.Minute); ; {
		err := run(nil, name, args...)
		if err == nil || !strings.Contains(err.Error(), "cannot lock") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, time.Second)
	}
}

func run(env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
