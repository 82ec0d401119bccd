// Package leftover marks what test fixtures start outside the test
// process (Podman containers, tmux and Neovim servers on the host) with
// the test process that owns them, and removes what a run that ended
// without its cleanup left behind (a `go test -timeout` panics past every
// t.Cleanup). A mark names the owner by pid and start time, so a live run
// (another package, another checkout) is never touched and a reused pid
// is not taken for the owner.
package leftover

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stem-edu/stem/internal/lib/procstat"
)

// EnvVar is set in the environment of the host servers a fixture starts.
const EnvVar = "STEM_TEST_OWNER"

// Label is set on the containers a fixture creates.
const Label = "io.stem.test.owner"

// Owner is this process's mark: "pid:start", start in clock ticks since
// boot (/proc/PID/stat), so that it cannot match a later process that
// reuses the pid.
func Owner() string { return owner(os.Getpid()) }

// Env is EnvVar=Owner(), for a server's environment.
func Env() string { return EnvVar + "=" + Owner() }

func owner(pid int) string {
	return strconv.Itoa(pid) + ":" + startTime(pid)
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

// alive reports whether the owner a mark names still runs.
func alive(mark string) bool {
	pid, start, ok := strings.Cut(mark, ":")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil || n <= 0 || start == "" {
		return true // not a mark of ours: leave it
	}
	return startTime(n) == start
}

var once sync.Once

// Sweep removes, once per test process, the host processes and (when
// Podman is installed) the containers whose owner has ended. It never
// fails a test: what it cannot remove stays.
func Sweep() {
	once.Do(func() {
		processes()
		containers()
	})
}

// processes sends SIGKILL to every process of ours whose environment
// carries a mark of an ended owner (a tmux server, its shells and Neovim).
func processes() {
	uid := os.Getuid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(d, &st) != nil || int(st.Uid) != uid {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if mark, ok := bytes.CutPrefix(kv, []byte(EnvVar+"=")); ok {
				if !alive(string(mark)) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				break
			}
		}
	}
}

// containers removes the containers carrying Label of an ended owner.
func containers() {
	if _, err := exec.LookPath("podman"); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", "ps", "-a", "--filter", "label="+Label,
		"--format", `{{.ID}} {{index .Labels "`+Label+`"}}`).Output()
	if err != nil {
		return
	}
	var gone []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, mark, ok := strings.Cut(line, " ")
		if ok && !alive(mark) {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		exec.CommandContext(ctx, "podman", append([]string{"rm", "-f", "-t", "0"}, gone...)...).Run()
	}
}
