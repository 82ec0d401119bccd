package class

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stem-edu/stem/internal/class/dashboard"
	"github.com/stem-edu/stem/internal/testenv"
)

// syncBuffer is a Buffer safe for one writer and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only the tail matters: a redrawn table must not fill the test.
	if s.b.Len() > 1<<20 {
		s.b.Next(s.b.Len() - 64<<10)
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startStemctl starts the built stemctl with args in its own process
// group, its stdout read by out.
func startStemctl(t testing.TB, env []string, out io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	bin := testenv.Binary(t, "stemctl", "./cmd/stemctl")
	cmd := exec.Command(filepath.Join(bin, "stemctl"), args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd
}

// ended waits a generous while for cmd and says whether it ended.
func ended(cmd *exec.Cmd) bool {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return false
	}
}

// `stemctl class serve` and `stemctl class status --watch` under the same
// hostile students: memory bounded, the honest students' tiles and rows
// keep coming, mallory's tile says it was cut off, and SIGINT (serve) and
// SIGTERM (--watch) end them.
func TestHostileStudentsServe(t *testing.T) {
	_, env, _ := hostileClass(t, 5)
	t.Run("serve", func(t *testing.T) {
		cmd, tilesURL := startServe(t, env)
		stop := peakRSS(cmd.Process.Pid)
		if tiles, ok := waitTiles(cmd, tilesURL, 6, "mallory"); !ok {
			t.Logf("RSS %d KiB", vmRSS(cmd.Process.Pid))
			stop()
			t.Fatalf("tiles: %+v", tiles)
		}
		peak := stop()
		t.Logf("peak RSS of stemctl class serve under attack: %d KiB", peak)
		if peak > maxTeacherRSS {
			t.Errorf("class serve grew to %d KiB (bound %d KiB)", peak, maxTeacherRSS)
		}
		cmd.Process.Signal(syscall.SIGINT)
		if !ended(cmd) {
			t.Fatal("class serve still ran a minute after SIGINT")
		}
	})
	t.Run("watch", func(t *testing.T) {
		var out syncBuffer
		cmd := startStemctl(t, env, &out, "class", "status", "lab", "--watch", "--every", "500ms", "--timeout", "20s")
		stop := peakRSS(cmd.Process.Pid)
		for deadline := time.Now().Add(3 * time.Minute); strings.Count(out.String(), "\ns004 ") < 6 || !strings.Contains(out.String(), "\nanna "); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) || vmRSS(cmd.Process.Pid) > 4*maxTeacherRSS {
				t.Logf("RSS %d KiB", vmRSS(cmd.Process.Pid))
				stop()
				t.Fatalf("the table stopped: %s", out.String())
			}
		}
		peak := stop()
		t.Logf("peak RSS of stemctl class status --watch under attack: %d KiB", peak)
		if peak > maxTeacherRSS {
			t.Errorf("class status --watch grew to %d KiB (bound %d KiB)", peak, maxTeacherRSS)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if !ended(cmd) {
			t.Fatal("class status --watch still ran a minute after SIGTERM")
		}
	})
}

// startServe starts `stemctl class serve lab` and returns it and the
// address of its tiles.
func startServe(t testing.TB, env []string) (*exec.Cmd, string) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd := startStemctl(t, env, pw, "class", "serve", "lab", "--timeout", "20s")
	sc := bufio.NewScanner(pr)
	url := ""
	for url == "" && sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "http://") {
			url = l
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatal("serve printed no address")
	}
	return cmd, strings.Replace(url, "/?token=", "/tiles?token=", 1)
}

// fetchTiles gets the dashboard's tiles (none on failure).
func fetchTiles(url string) []dashboard.Tile {
	res, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var body struct{ Tiles []dashboard.Tile }
	json.NewDecoder(res.Body).Decode(&body)
	return body.Tiles
}

// waitTiles waits until honest students' tiles (names starting with "s",
// and anna)
// show an answering instance and the hostile student's tile says it was
// cut off ("" for none); false after three minutes or past four times
// maxTeacherRSS.
func waitTiles(cmd *exec.Cmd, url string, honest int, hostile string) ([]dashboard.Tile, bool) {
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		tiles := fetchTiles(url)
		ok, cut := 0, hostile == ""
		for _, tl := range tiles {
			if (strings.HasPrefix(tl.Student, "s") || tl.Student == "anna") && tl.State == "answers" {
				ok++
			}
			if tl.Student == hostile && strings.Contains(tl.Error, "cut off") {
				cut = true
			}
		}
		if ok == honest && cut {
			return tiles, true
		}
		if time.Now().After(deadline) || vmRSS(cmd.Process.Pid) > 4*maxTeacherRSS {
			return tiles, false
		}
	}
}
