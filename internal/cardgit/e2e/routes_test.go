package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGitRoutesRootful(t *testing.T)  { testRoutes(t, false) }
func TestGitRoutesRootless(t *testing.T) { testRoutes(t, true) }

func testRoutes(t *testing.T, rootless bool) {
	t.Parallel() // a world of its own: account, workspace, containers
	w := newWorld(t, rootless)
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			w := *w
			w.t = t
			w.attackRoute(r)
		})
	}
	t.Run("nested", func(t *testing.T) {
		w := *w
		w.t = t
		w.nestedRoute()
	})
	t.Run("replaced-on-host", func(t *testing.T) {
		w := *w
		w.t = t
		w.replacedRoute()
	})
	t.Run("race", func(t *testing.T) {
		w := *w
		w.t = t
		w.raceRoute()
	})
}

// attackRoute: after the attack in a container stemctl made, the card's
// .git is the one it was, whatever stem reports goes once the student
// removes it, and the student's git commands (and stemctl commit) on the
// host run nothing. The control shows the attack reaching the host.
func (w *world) attackRoute(r route) {
	t := w.t
	card := w.card(r.name)
	inst := w.up(r.name, "1")
	git := filepath.Join(card, ".git")
	before, content := identity(t, git), snapshot(t, git)
	canary := w.canary(r.name)
	out := w.inside(inst, preamble(canary, w.http.URL)+r.attack)
	if got := identity(t, git); got != before {
		t.Fatalf("the container replaced the card's .git (%s, was %s):\n%s", got, before, out)
	}
	if got := snapshot(t, git); got != content {
		t.Fatalf("the container changed the card's .git:\nbefore:\n%s\nafter:\n%s\nthe attack printed:\n%s", content, got, out)
	}
	w.removeReported(inst, card)
	w.runBattery(card, card)
	w.runBattery(card, filepath.Join(card, "t1"))
	w.commit(inst)
	if c := read(canary); c != "" {
		t.Fatalf("git on the host ran the container's programs:\n%s\nthe attack printed:\n%s", c, out)
	}

	ccard := w.card(r.name + "-ctl")
	ccanary := w.canary(r.name + "-ctl")
	cout := w.control(ccard, preamble(ccanary, w.http.URL)+r.attack)
	if r.control != "" {
		w.sh(ccard, r.control)
	} else {
		w.runBattery(ccard, ccard)
	}
	got := read(ccanary)
	for _, want := range r.want {
		if !strings.Contains(got, want) {
			t.Errorf("control: %s did not run on the host (the test would not see this route):\ncanary:\n%s\nattack:\n%s", want, got, cout)
		}
	}
}

// removeReported does what stemctl status says about the card: it names
// repositories the attack left in the card (a copy of .git moved into the
// card root is one), and the student removes them. A problem with the
// card's own .git is a failure: the container must not be able to make one.
func (w *world) removeReported(inst, card string) {
	t := w.t
	st, r := w.status(inst)
	for _, p := range st.Git {
		if p.Path == filepath.Join(card, ".git") {
			t.Fatalf("stemctl status reports the card's own .git:\n%s", r.Stdout)
		}
		if !strings.HasPrefix(p.Path, card+"/") {
			t.Fatalf("stemctl status names a path outside the card: %s", p.Path)
		}
		if out, err := w.sh(card, "rm -rf "+q(p.Path)); err != nil {
			// What the container made with modes that keep the student
			// out (cp -a of a .git): removed from inside, as it says.
			if !strings.Contains(r.Stdout+strings.Join(st.Problems, " "), "stemctl exec") {
				t.Fatalf("rm -rf %s on the host: %v\n%s\nand status does not say what else to do:\n%s", p.Path, err, out, r.Stdout)
			}
			w.must("exec", inst, "--", "rm", "-rf", p.Path)
		}
	}
	if st, r := w.status(inst); len(st.Git) > 0 || r.Code != 0 {
		t.Fatalf("after removing what status named, it still reports:\n%s\n%s", r.Stdout, r.Stderr)
	}
}

// commit is the student's stemctl commit: it succeeds (or finds nothing).
func (w *world) commit(inst string) {
	r := w.stemctl("commit", inst, "-m", "student's work")
	if r.Code != 0 {
		w.t.Fatalf("stemctl commit: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// nestedRoute: repositories the container plants below the card root are
// reported by status, refused by up (nothing changed), commit and
// stem-mcp's effectful calls, each naming the paths; plain git run inside
// one on the host refuses it (it is not the student's) and runs nothing
// (control: given to the student, it runs its hooks); once the student
// removes them, everything works again.
func (w *world) nestedRoute() {
	t := w.t
	card := w.card("nested")
	inst := w.up("nested", "1")
	canary := w.canary("nested")
	out := w.inside(inst, preamble(canary, w.http.URL)+nestedAttack)
	nested := []string{"t1/x/.git", "t2/y/.git", "t1/bare", ".stem/instances/zz/.git"}
	st, r := w.status(inst)
	if r.Code == 0 || len(st.Git) != len(nested) {
		t.Fatalf("status after the attack (%s): exit %d\n%s", out, r.Code, r.Stdout)
	}
	for i, p := range []string{".stem/instances/zz/.git", "t1/bare", "t1/x/.git", "t2/y/.git"} {
		if st.Git[i].Path != filepath.Join(card, p) {
			t.Errorf("status names %s, want %s", st.Git[i].Path, filepath.Join(card, p))
		}
	}
	hr := w.stemctl("status", inst)
	checks := map[string]testResultLike{
		"status": {hr.Code, hr.Stdout + hr.Stderr},
	}
	ur := w.stemctl("up", "native-amd64", "g", "nested", "1")
	checks["up"] = testResultLike{ur.Code, ur.Stderr}
	cr := w.stemctl("commit", inst, "-m", "x")
	checks["commit"] = testResultLike{cr.Code, cr.Stderr}
	mr := w.stemctl("mcp", "call", "--level", "assist", "--instance", inst, "nvim_hint", "path=t1/hello.c", "line=1", "text=hint")
	checks["mcp"] = testResultLike{mr.Code, mr.Stdout + mr.Stderr}
	for what, c := range checks {
		if c.code == 0 {
			t.Errorf("%s went on with nested repositories in the card:\n%s", what, c.text)
		}
		for _, p := range nested {
			if !strings.Contains(c.text, filepath.Join(card, p)) {
				t.Errorf("%s does not name %s:\n%s", what, p, c.text)
			}
		}
		if !strings.Contains(c.text, "rm -rf") {
			t.Errorf("%s does not say what to do:\n%s", what, c.text)
		}
	}
	if !strings.Contains(checks["up"].text, "nothing was changed") || !strings.Contains(checks["mcp"].text, "refused") {
		t.Errorf("up / mcp:\n%s\n%s", checks["up"].text, checks["mcp"].text)
	}
	if c := read(canary); c != "" {
		t.Fatalf("stem ran the container's programs:\n%s", c)
	}
	// Plain git in each of them, on the host, refuses the repository: the
	// container made it as its own root, a host uid that is not the
	// student's (internal/idmap).
	for _, dir := range []string{"t1/x", "t2/y", "t1/bare"} {
		os.Remove(canary)
		out, err := w.sh(filepath.Join(card, dir), "git commit -q --allow-empty -m x; git status")
		if c := read(canary); c != "" {
			t.Errorf("git on the host in %s (a repository the container made) ran:\n%s", dir, c)
		}
		if err == nil || !strings.Contains(out, "dubious ownership") {
			t.Errorf("git on the host in %s did not refuse the container's repository: %v\n%s", dir, err, out)
		}
	}
	// Nor does the student's battery, in the card root (git add -A stages
	// t1/x as an embedded repository, whose fsmonitor git status would
	// run) and below it, with the repositories still there.
	os.Remove(canary)
	w.runBattery(card, card)
	w.runBattery(card, filepath.Join(card, "t1"))
	if c := read(canary); c != "" {
		t.Errorf("git on the host in the card ran the container's programs:\n%s", c)
	}
	// Control: the same repositories given to the student (as a container
	// whose root is the student would have made them) run their hooks.
	for _, dir := range []string{"t1/x", "t1/bare"} {
		if err := w.giveStudent(filepath.Join(card, dir)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(canary)
	w.sh(filepath.Join(card, "t1/x"), "git commit -q --allow-empty -m x")
	if !strings.Contains(read(canary), "hook-pre-commit") {
		t.Errorf("control: git on the host in t1/x, owned by the student, ran no hook (the route is not live)")
	}
	os.Remove(canary)
	w.removeReported(inst, card)
	w.must("up", "native-amd64", "g", "nested", "1")
	w.runBattery(card, card)
	w.runBattery(card, filepath.Join(card, "t1"))
	w.commit(inst)
	if c := read(canary); c != "" {
		t.Fatalf("after the student removed the reported repositories, git on the host ran:\n%s", c)
	}
}

type testResultLike struct {
	code int
	text string
}

// raceRoute: one instance of the card swaps .git as fast as it can while
// a second instance of the same card is brought up again and again (Podman
// resolves the mount source by path). No swap happens (the card's .git is
// a mount point in the first), and each second instance has the card's
// .git. Control: in a container mounted as before, the swaps happen.
func (w *world) raceRoute() {
	t := w.t
	card := w.card("race")
	a := w.up("race", "1")
	git := filepath.Join(card, ".git")
	want := identity(t, git)
	w.stemctl("exec", a, "--", "sh", "-c", "rm -f /tmp/stem-stop; cd \"$STEM_CARD_PATH\"; LIMIT=1000000 setsid sh -c '"+strings.ReplaceAll(swapLoop, "'", `'\''`)+"' >/tmp/swap.log 2>&1 &")
	for i := 0; i < 3; i++ {
		b := w.up("race", "2")
		in := strings.TrimSpace(w.inside(b, `stat -c %d:%i "$STEM_CARD_PATH/.git"`))
		if in != want {
			t.Errorf("up %d: the second instance has .git %s, the card's is %s", i, in, want)
		}
		if st, r := w.status(b); len(st.Git) > 0 {
			t.Errorf("up %d: status reports %s", i, r.Stdout)
		}
		w.must("rm", b)
	}
	w.inside(a, "touch /tmp/stem-stop")
	// Wait for the loop to see the stop file and write its count.
	log := w.inside(a, "until grep -q tries= /tmp/swap.log; do sleep 0.05; done; cat /tmp/swap.log")
	if !strings.Contains(log, "swaps=0") || !strings.Contains(log, "busy") {
		t.Fatalf("in the first instance, .git was swapped (or the loop never ran):\n%s", log)
	}
	if identity(t, git) != want {
		t.Fatal("the card's .git changed")
	}
	ccard := w.card("race-ctl")
	cout := w.control(ccard, "LIMIT=200\n"+swapLoop)
	if strings.Contains(cout, "swaps=0") || !strings.Contains(cout, "swaps=") {
		t.Errorf("control: no swap happened in a container mounted as before:\n%s", cout)
	}
}

// replacedRoute: a .git that is not the one the instance was created with
// (here replaced on the host, as a re-clone would) is reported by status,
// which also sees that the running container has the old one, refused by
// up (nothing changed), commit and stem-mcp's effectful calls, each naming
// the path and what to do.
func (w *world) replacedRoute() {
	t := w.t
	card := w.card("replaced")
	inst := w.up("replaced", "1")
	git := filepath.Join(card, ".git")
	w.mustSh(card, "mv .git ../replaced-git && cp -a ../replaced-git .git")
	st, r := w.status(inst)
	if r.Code == 0 || len(st.Git) < 1 || st.Git[0].Path != git {
		t.Fatalf("status with a replaced .git: exit %d\n%s", r.Code, r.Stdout)
	}
	text := strings.Join(st.Problems, "\n")
	for _, want := range []string{"another directory than the instance was created with", "not what the running container has", "stemctl rm", inst} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	for _, args := range [][]string{{"up", "native-amd64", "g", "replaced", "1"}, {"commit", inst, "-m", "x"},
		{"mcp", "call", "--level", "assist", "--instance", inst, "nvim_hint", "path=t1/hello.c", "line=1", "text=hint"}} {
		r := w.stemctl(args...)
		if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, git+" is another directory") {
			t.Errorf("stemctl %v with a replaced .git: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	w.mustSh(card, "rm -rf .git && mv ../replaced-git .git")
	if st, r := w.status(inst); len(st.Git) > 0 || r.Code != 0 {
		t.Fatalf("with the original .git back: %s", r.Stdout)
	}
}

// giveStudent makes dir and everything in it the student's (the test runs
// as root).
func (w *world) giveStudent(dir string) error {
	uid, gid := 0, 0
	if c := w.a.Cred; c != nil {
		uid, gid = int(c.Uid), int(c.Gid)
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
