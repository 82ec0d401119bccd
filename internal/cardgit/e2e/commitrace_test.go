package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// watcher is the container's compiled helper (gcc is in the native
// image). In the card, relative to it:
//
//	watch DIR N OP A B  on the Nth open of DIR (inotify IN_OPEN: the
//	                    events come from the inode, whatever mount the
//	                    host reaches it by) do OP: x exchanges A and B
//	                    (renameat2 RENAME_EXCHANGE), r renames A to B,
//	                    f replaces A by a FIFO, s runs A with sh
//	fifo PIPE A B       open the FIFO PIPE for writing, which returns once
//	                    a reader (git on the host) opened it and waits for
//	                    data, exchange A and B, close
//	loop A B STOP       exchange A and B until STOP exists
//
// It prints "ready" once armed and "fired" once it acted.
const watcher = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/fs.h>
static int xchg(const char *a, const char *b) { return syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE); }
static void say(const char *s) { printf("%s\n", s); fflush(stdout); }
int main(int argc, char **argv) {
	if (argc == 5 && !strcmp(argv[1], "fifo")) {
		say("ready");
		int fd = open(argv[2], O_WRONLY);
		if (fd < 0 || xchg(argv[3], argv[4])) { perror("fifo"); return 1; }
		say("fired");
		close(fd);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "loop")) {
		long n = 0;
		say("ready");
		while (access(argv[4], F_OK) != 0)
			if (xchg(argv[2], argv[3]) == 0) n++;
		if (n % 2) xchg(argv[2], argv[3]);
		printf("fired %ld\n", n); fflush(stdout);
		return 0;
	}
	if (argc != 7 || strcmp(argv[1], "watch")) { fprintf(stderr, "usage\n"); return 2; }
	int in = inotify_init1(IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, argv[2], IN_OPEN) < 0) { perror("inotify"); return 1; }
	int want = atoi(argv[3]), seen = 0;
	char buf[4096];
	say("ready");
	while (seen < want) {
		ssize_t n = read(in, buf, sizeof buf);
		if (n <= 0) { perror("read"); return 1; }
		for (char *p = buf; p < buf + n; ) {
			struct inotify_event *e = (struct inotify_event *)p;
			if (e->mask & IN_OPEN) seen++;
			p += sizeof *e + e->len;
		}
	}
	int rc = 0;
	switch (argv[4][0]) {
	case 'x': rc = xchg(argv[5], argv[6]); break;
	case 'r': rc = rename(argv[5], argv[6]); break;
	case 'f': unlink(argv[5]); rc = mkfifo(argv[5], 0644); break;
	case 's': rc = system(argv[5]); break;
	}
	if (rc) { perror("act"); return 1; }
	say("fired");
	return 0;
}
`

func TestCommitRaceRootful(t *testing.T)  { testCommitRace(t, false) }
func TestCommitRaceRootless(t *testing.T) { testCommitRace(t, true) }

func testCommitRace(t *testing.T, rootless bool) {
	t.Parallel() // a world of its own: account, workspace, containers
	w := newWorld(t, rootless)
	for _, c := range []struct {
		name string
		f    func(*world, string, string)
	}{
		{"exchange", (*world).exchangeAttack},
		{"toggle", (*world).toggleAttack},
		{"planted", (*world).plantedAttack},
		{"sparse", (*world).sparseAttack},
		{"fifo", (*world).fifoAttack},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := *w
			w.t = t
			name := "cr" + c.name
			card := w.card(name)
			inst := w.up(name, "1")
			w.inside(inst, "cat > /tmp/w.c <<'EOF'\n"+watcher+"EOF\ngcc -O2 -o /tmp/w /tmp/w.c")
			c.f(&w, card, inst)
		})
	}
}

// hostSecret makes a directory of the student's on the host, readable
// only by them (as ~/.ssh is), with a canary file; it returns the
// directory and the canary's content.
func (w *world) hostSecret(name string) (string, string) {
	dir := filepath.Join(w.a.Base, "secret-"+name)
	canary := fmt.Sprintf("CANARY-%s-%d", name, time.Now().UnixNano())
	w.mustSh(w.a.Base, fmt.Sprintf("rm -rf %[1]s && mkdir -m 700 %[1]s %[1]s/sub && echo x > %[1]s/sub/f && printf '%%s\\n' %[2]s > %[1]s/CANARY_secret && chmod 600 %[1]s/CANARY_secret", q(dir), q(canary)))
	return dir, canary
}

// decoy makes z/CANARY_secret (a decoy) and zl, a symlink to dir, in
// the card, from inside the container (which cannot read dir).
func (w *world) decoy(inst, dir string) {
	out := w.inside(inst, fmt.Sprintf(`cd "$STEM_CARD_PATH" && mkdir -p z && echo decoy > z/CANARY_secret && ln -s %s zl && cat zl/CANARY_secret 2>&1; true`, q(dir)))
	if strings.Contains(out, "CANARY-") {
		w.t.Fatalf("the container reads the host directory itself: the test proves nothing:\n%s", out)
	}
}

// background starts the watcher in the container with args; its output
// goes to /tmp/LOG, and it returns once the watcher is armed.
func (w *world) background(inst, log, args string) {
	w.inside(inst, fmt.Sprintf(`cd "$STEM_CARD_PATH" && { setsid /tmp/w %s >/tmp/%s 2>&1 </dev/null & echo $! >/tmp/%[2]s.pid; }`, args, log))
	w.inside(inst, fmt.Sprintf(`until grep -q ready /tmp/%[1]s || ! kill -0 $(cat /tmp/%[1]s.pid); do sleep 0.02; done; cat /tmp/%[1]s`, log))
}

// leaked reports whether any object of the card's repository (or of a
// quarantine stem left) holds canary.
func (w *world) leaked(card, canary string) bool {
	out := w.mustSh(card, `git cat-file --batch-all-objects --batch; for d in .git/objects/stem-incoming-*; do [ -d "$d" ] && GIT_OBJECT_DIRECTORY="$PWD/$d" GIT_ALTERNATE_OBJECT_DIRECTORIES="$PWD/.git/objects" git cat-file --batch-all-objects --batch; done; true`)
	return strings.Contains(out, canary)
}

// leftovers lists what a commit must not leave in .git.
func (w *world) leftovers(card string) string {
	return w.mustSh(card, `find .git -name 'stem-incoming-*' -o -name 'tmp_*' -o -name '*.lock'`)
}

// exchangeAttack: the first route. When stem opens the decoy
// directory z a second time (the nested-repository check opens it
// first, the walk second), the container exchanges z with zl, a symlink
// to a host directory holding a canary of the student's. Control: plain
// git add --all on the host, made to wait at the same point
// deterministically (z/.gitignore is a FIFO, which git opens and waits
// on once it has listed z), takes the canary into the commit.
func (w *world) exchangeAttack(card, inst string) {
	t := w.t
	dir, canary := w.hostSecret("x")
	w.decoy(inst, dir)
	if _, r := w.status(inst); !strings.Contains(r.Stdout, `"git_note"`) || !strings.Contains(r.Stdout, filepath.Join(card, "zl")+" is a symlink the container made") {
		t.Errorf("status does not say plain git add is racy with the container's symlink zl:\n%s", r.Stdout)
	}
	// The exchange lands between stem's listing of z and its read of
	// z/CANARY_secret (stem then refuses), or after the read (stem
	// commits the decoy): tried until it lands in the window.
	hit := false
	for i := 0; i < 8 && !hit; i++ {
		w.inside(inst, `cd "$STEM_CARD_PATH" && if [ -L z ]; then mv z zt && mv zl z && mv zt zl; fi; echo `+fmt.Sprint(i)+` > t1/n.txt`)
		w.background(inst, "x.log", "watch z 2 x z zl")
		r := w.stemctl("commit", inst, "-m", "exchange")
		log := w.inside(inst, "cat /tmp/x.log")
		if !strings.Contains(log, "fired") {
			t.Fatalf("the exchange did not happen during stemctl commit (the test proves nothing):\n%s\ncommit: %s%s", log, r.Stdout, r.Stderr)
		}
		t.Logf("stemctl commit under the exchange: exit %d %s%s", r.Code, r.Stdout, r.Stderr)
		hit = r.Code != 0 && strings.Contains(r.Stderr, "changed while stem read it")
		if r.Code != 0 && !hit {
			t.Errorf("stemctl commit failed without saying the card changed: %s", r.Stderr)
		}
		if w.leaked(card, canary) {
			t.Fatalf("the host canary is in the card's objects after stemctl commit")
		}
	}
	if !hit {
		t.Errorf("in 8 tries the exchange never landed between stem's listing and its read")
	}
	if l := w.leftovers(card); l != "" {
		t.Errorf("left in .git: %s", l)
	}
	// Control: a fresh decoy y (untracked: stem may have committed z),
	// with a FIFO y/sub/.gitignore, which git opens when it lists y/sub,
	// its first look at y/sub/f: by then it holds y's listing. git closes
	// a FIFO it finds empty without reading it, so the exchange races
	// git's next steps; it usually wins, and is tried until it does (a
	// loaded machine, the two worlds running side by side, may need many).
	var out string
	const controlTries = 40
	for i := 0; i < controlTries && !w.leaked(card, canary); i++ {
		y, yl := fmt.Sprintf("y%d", i), fmt.Sprintf("yl%d", i)
		w.inside(inst, fmt.Sprintf(`cd "$STEM_CARD_PATH" && mkdir -p %[1]s/sub && echo decoy > %[1]s/CANARY_secret && echo x > %[1]s/sub/f && ln -s %[3]s %[2]s && mkfifo %[1]s/sub/.gitignore`, y, yl, q(dir)))
		w.background(inst, "c.log", fmt.Sprintf("fifo %[1]s/sub/.gitignore %[1]s %[2]s", y, yl))
		out, _ = w.sh(card, "git add --all 2>&1")
		if log := w.inside(inst, "cat /tmp/c.log"); !strings.Contains(log, "fired") {
			t.Fatalf("control: the exchange did not happen during git add:\n%s\n%s", log, out)
		}
		// The FIFO goes, else git commit waits on it for a writer.
		w.inside(inst, fmt.Sprintf(`cd "$STEM_CARD_PATH" && rm -f %[1]s/sub/.gitignore %[2]s/sub/.gitignore`, y, yl))
		cout, _ := w.sh(card, fmt.Sprintf("git commit -qm plain%d 2>&1", i))
		out += cout
	}
	if !w.leaked(card, canary) {
		t.Errorf("control: plain git add --all did not take the host canary in %d tries:\n%s\n%s", controlTries, out, w.mustSh(card, "git show --stat HEAD"))
	}
}

// toggleAttack: the blind route, no inotify: the container exchanges z
// and zl in a loop while the student commits again and again. stem's
// commits fail or store the decoy or the link; the canary never. Control:
// plain git add --all + git commit in the same loop takes it.
func (w *world) toggleAttack(card, inst string) {
	t := w.t
	dir, canary := w.hostSecret("t")
	w.decoy(inst, dir)
	w.background(inst, "t.log", "loop z zl /tmp/stop-t")
	results := map[string]int{}
	for i := 0; i < 12; i++ {
		w.inside(inst, fmt.Sprintf(`echo %d > "$STEM_CARD_PATH/t1/n.txt"`, i))
		r := w.stemctl("commit", inst, "-m", fmt.Sprintf("toggle %d", i))
		results[fmt.Sprintf("exit %d", r.Code)]++
		if w.leaked(card, canary) {
			t.Fatalf("commit %d: the host canary is in the card's objects:\n%s%s", i, r.Stdout, r.Stderr)
		}
	}
	t.Logf("stemctl commit under the toggle loop: %v", results)
	if l := w.leftovers(card); l != "" {
		t.Errorf("left in .git: %s", l)
	}
	tries := 0
	for ; tries < 400 && !w.leaked(card, canary); tries++ { // a race: a loaded machine may need many
		w.sh(card, fmt.Sprintf("echo %d > t1/n.txt; git add --all; git commit -qm plain", tries))
	}
	w.inside(inst, "touch /tmp/stop-t; until grep -q fired /tmp/t.log; do sleep 0.02; done")
	if !w.leaked(card, canary) {
		t.Errorf("control: %d plain git commits under the toggle loop never took the canary", tries)
	} else {
		t.Logf("control: plain git took the canary after %d commits", tries+1)
	}
}

// plantedAttack: the second route. A repository the container
// prepared is renamed to sub/.git when stem opens sub the second time
// (its walk). stem refuses the nested repository or commits sub's files
// without it; never a gitlink. Control: plain git add --all stages it as
// a gitlink, pointing at the container's commit.
func (w *world) plantedAttack(card, inst string) {
	t := w.t
	// Prepared in pieces (no HEAD yet), which the nested-repository
	// check does not take for a repository; assembled when stem opens sub.
	w.inside(inst, `cd "$STEM_CARD_PATH" && mkdir sub && echo mine > sub/notes.txt && git init -q .p && git -C .p -c user.name=x -c user.email=x@x commit -q --allow-empty -m planted && mv .p/.git .prep && rmdir .p && mv .prep/HEAD .prep/HEAD0`)
	if st, r := w.status(inst); len(st.Git) != 0 || !strings.Contains(r.Stdout, filepath.Join(card, ".prep/refs")) {
		t.Errorf("status: the pieces are no repository yet, but plain git add is racy with them:\n%s", r.Stdout)
	}
	w.background(inst, "p.log", "watch sub 2 s 'mv .prep/HEAD0 .prep/HEAD && mv .prep sub/.git' -")
	r := w.stemctl("commit", inst, "-m", "planted")
	if log := w.inside(inst, "cat /tmp/p.log"); !strings.Contains(log, "fired") {
		t.Fatalf("the repository was not planted during stemctl commit:\n%s\n%s", log, r.Stderr)
	}
	t.Logf("stemctl commit with sub/.git planted meanwhile: exit %d %s%s", r.Code, r.Stdout, r.Stderr)
	// A refusal names what stem saw: sub/.git, a change under its read,
	// or .prep caught between its two renames (HEAD in place, not yet
	// moved: a bare repository).
	if r.Code != 0 && !strings.Contains(r.Stderr, filepath.Join(card, "sub/.git")) && !strings.Contains(r.Stderr, "changed while stem read it") &&
		!strings.Contains(r.Stderr, filepath.Join(card, ".prep")+" is a bare repository") {
		t.Errorf("refused without naming sub/.git: %s", r.Stderr)
	}
	if tree := w.mustSh(card, "git ls-tree -r HEAD"); strings.Contains(tree, "160000") {
		t.Fatalf("stem's commit holds a gitlink:\n%s", tree)
	}
	if st, r := w.status(inst); len(st.Git) == 0 {
		t.Errorf("status does not report the planted sub/.git:\n%s", r.Stdout)
	}
	// (stem may have committed sub/notes.txt: then git keeps sub a
	// directory of tracked files.)
	out, _ := w.sh(card, "git rm -rq --cached sub; git add --all 2>&1; git ls-files -s sub")
	if !strings.Contains(out, "160000") {
		t.Errorf("control: plain git add staged no gitlink:\n%s", out)
	}
}

// sparseAttack: the third route. A sparse 200 GB file is refused
// by its size, before any read, naming the path and the bound, and
// nothing is left in .git. Control: plain git add starts packing it
// (a tmp_pack appears) and, interrupted, leaves that behind.
func (w *world) sparseAttack(card, inst string) {
	t := w.t
	w.inside(inst, `truncate -s 200G "$STEM_CARD_PATH/t1/notes.txt"`)
	head := w.mustSh(card, "git rev-parse HEAD")
	r := w.stemctl("commit", inst, "-m", "sparse")
	if r.Code == 0 || !strings.Contains(r.Stderr, "t1/notes.txt") || !strings.Contains(r.Stderr, "more than") {
		t.Fatalf("stemctl commit of a 200 GB file: exit %d %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if l := w.leftovers(card); l != "" {
		t.Errorf("left in .git: %s", l)
	}
	if got := w.mustSh(card, "git rev-parse HEAD"); got != head {
		t.Errorf("HEAD moved")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := w.a.Command(ctx, "git", "add", "t1/notes.txt")
	cmd.Dir = card
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		if l := w.leftovers(card); strings.Contains(l, "tmp_") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("control: plain git add of the 200 GB file ended (%v) before writing anything", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if l := w.leftovers(card); !strings.Contains(l, "tmp_") {
		t.Errorf("control: interrupted git add left nothing behind")
	}
	w.mustSh(card, "find .git -name 'tmp_*' -delete; rm -f .git/index.lock")
}

// fifoAttack: a FIFO replaces t1/hello.c when stem first opens t1 (its
// nested-repository check, the commit's first step), tried until it lands
// before stem reads the file. stem never opens it (O_PATH, then fstat):
// the commit is refused naming it, or made without it, and returns. (The
// control that git opens a FIFO and waits on it is the exchange's.)
func (w *world) fifoAttack(card, inst string) {
	t := w.t
	hit := false
	for i := 0; i < 8 && !hit; i++ {
		w.inside(inst, fmt.Sprintf(`cd "$STEM_CARD_PATH" && rm -f t1/hello.c && echo 'int main(void) { return %d; }' > t1/hello.c`, i))
		w.background(inst, "f.log", "watch t1 1 f t1/hello.c -")
		r := w.stemctl("commit", inst, "-m", "fifo")
		if log := w.inside(inst, "cat /tmp/f.log"); !strings.Contains(log, "fired") {
			t.Fatalf("no FIFO appeared during stemctl commit:\n%s\n%s", log, r.Stderr)
		}
		t.Logf("stemctl commit with a FIFO appearing: exit %d %s%s", r.Code, r.Stdout, r.Stderr)
		hit = r.Code != 0 && strings.Contains(r.Stderr, "t1/hello.c is a named pipe")
		if r.Code != 0 && !hit {
			t.Errorf("refused without naming the FIFO: %s", r.Stderr)
		}
		if l := w.leftovers(card); l != "" {
			t.Errorf("left in .git: %s", l)
		}
	}
	if !hit {
		t.Errorf("in 8 tries the FIFO never appeared before stem read t1/hello.c")
	}
}
