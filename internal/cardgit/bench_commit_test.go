package cardgit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommit: stemctl commit of one changed file, in the demo card
// (examples/workspace/demo/hello) and in a card of 1,000 files; "addall"
// is the commit through git add --all that stem made before it staged
// cards itself, kept here only to compare.
func BenchmarkCommit(b *testing.B) {
	for _, c := range []struct {
		name  string
		files int
	}{{"demo", 0}, {"1000files", 1000}} {
		for _, how := range []string{"stem", "addall"} {
			b.Run(c.name+"/"+how, func(b *testing.B) {
				card, env := benchCard(b, c.files)
				id, err := Inspect(card)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				cpu0 := cpuTime()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					os.WriteFile(filepath.Join(card, "changed.c"), []byte(strconv.Itoa(i)), 0o644)
					b.StartTimer()
					opt := CommitOptions{Card: card, Want: []Identity{id}, Message: "bench", Env: env}
					if how == "stem" {
						_, err = Commit(ctx, opt)
					} else {
						err = addAllCommit(ctx, opt)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				// CPU time of stemctl's side and every git it ran: what
				// the wall time means on an idle machine.
				b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// cpuTime is the user and system time of this process and its waited-for
// children.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	var t time.Duration
	for _, r := range []syscall.Rusage{self, kids} {
		t += time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return t
}

func benchCard(b *testing.B, files int) (string, []string) {
	base := b.TempDir()
	card := filepath.Join(base, "card")
	if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot(), "examples/workspace/demo/hello"), card).CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	for i := 0; i < files; i++ {
		p := filepath.Join(card, "gen", strconv.Itoa(i%20), fmt.Sprintf("f%d.c", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("int f%d(void) { return %d; }\n", i, i)), 0o644)
	}
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = S\n\temail = s@example.org\n"), 0o644)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd := exec.Command("sh", "-c", "git init -q && git add -A && git commit -qm card")
	cmd.Dir, cmd.Env = card, append(env, "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	return card, env
}

// addAllCommit is the earlier Commit's git part: git add --all on the
// card, .stem and .rv reset, then git commit.
func addAllCommit(ctx context.Context, opt CommitOptions) error {
	if err := Check(ctx, opt.Card, opt.Want...); err != nil {
		return err
	}
	gitDir, err := GitDir(opt.Card)
	if err != nil {
		return err
	}
	r := newRunner("", opt.Card, gitDir, opt.Env)
	cfg, err := r.config(ctx)
	if err != nil {
		return err
	}
	if err := r.checkOrigins(cfg); err != nil {
		return err
	}
	r.overrides = append(r.overrides, driverOverrides(cfg)...)
	for _, args := range [][]string{{"add", "--all"}, {"reset", "-q", "--", ".stem", ".rv"}} {
		if err := r.run(ctx, io.Discard, args...); err != nil {
			return err
		}
	}
	err = r.command(ctx, "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return fmt.Errorf("nothing staged: %v", err)
	}
	if err := r.run(ctx, io.Discard, "commit", "--no-verify", "--no-edit", "--cleanup=strip", "-m", opt.Message); err != nil {
		return err
	}
	_, err = r.output(ctx, "rev-parse", "--verify", "HEAD")
	return err
}
