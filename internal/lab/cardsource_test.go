package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

func TestIsGitSource(t *testing.T) {
	for src, want := range map[string]bool{
		"https://git.example.edu/course/cards.git": true,
		"https://git.example.edu/course/cards#v2":  true,
		"git@git.example.edu:course/cards":         true,
		"/srv/course/cards.git":                    true,
		"/srv/course/cards.git/":                   true,
		"file:///srv/course/cards":                 true,
		"/srv/course/cards":                        false,
		"cards":                                    false,
		"./my@dir/cards":                           false,
	} {
		if got := IsGitSource(src); got != want {
			t.Errorf("IsGitSource(%q) = %v, want %v", src, got, want)
		}
	}
}

// course makes a bare repository holding one card, series/card, and a
// tag v1; it returns the repository and a function that adds a second
// card on a new commit.
func course(t *testing.T, git string) (repo string, addCard func(name string)) {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	repo = filepath.Join(dir, "course.git")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.edu", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.edu")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	card := func(name string) {
		d := filepath.Join(work, "series", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "stem.toml"), []byte("[card]\ntitle = \""+name+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	card("one")
	run("init", "-q", "-b", "main", work)
	run("-C", work, "add", ".")
	run("-C", work, "commit", "-q", "-m", "one")
	run("-C", work, "tag", "v1")
	run("clone", "-q", "--bare", work, repo)
	return repo, func(name string) {
		card(name)
		run("-C", work, "add", ".")
		run("-C", work, "commit", "-q", "-m", name)
		run("-C", work, "push", "-q", repo, "main")
	}
}

func TestFetchCardsFollowsTheRepository(t *testing.T) {
	git := needs.Program(t, "git", "git")
	repo, addCard := course(t, git)
	labDir := t.TempDir()
	ctx := context.Background()

	dir, err := FetchCards(ctx, labDir, repo)
	if err != nil {
		t.Fatal(err)
	}
	if cards, err := courseCards(dir); err != nil || strings.Join(cards, " ") != "series/one" {
		t.Fatalf("cards %v, %v; want series/one", cards, err)
	}
	addCard("two")
	again, err := FetchCards(ctx, labDir, repo)
	if err != nil {
		t.Fatal(err)
	}
	if again != dir {
		t.Fatalf("second checkout at %s, first at %s: one place per source", again, dir)
	}
	if cards, _ := courseCards(again); strings.Join(cards, " ") != "series/one series/two" {
		t.Fatalf("after a new commit: cards %v, want series/one series/two", cards)
	}
	tagged, err := FetchCards(ctx, labDir, repo+"#v1")
	if err != nil {
		t.Fatal(err)
	}
	if cards, _ := courseCards(tagged); strings.Join(cards, " ") != "series/one" {
		t.Fatalf("at v1: cards %v, want series/one", cards)
	}

	// A failed fetch leaves the last good checkout in place.
	if _, err := FetchCards(ctx, labDir, repo+"#no-such-tag"); err == nil {
		t.Fatal("a missing tag was fetched")
	}
	if cards, _ := courseCards(again); len(cards) != 2 {
		t.Fatalf("a failed fetch changed the checkout: %v", cards)
	}
}

func TestFetchCardsRefusesARepositoryWithoutCards(t *testing.T) {
	git := needs.Program(t, "git", "git")
	empty := filepath.Join(t.TempDir(), "empty.git")
	if out, err := exec.Command(git, "init", "-q", "--bare", empty).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_, err := FetchCards(context.Background(), t.TempDir(), empty)
	if err == nil {
		t.Fatal("an empty repository gave cards")
	}
}

// The address is the administrator's, but git must still never run a
// command it names: an option smuggled in as the address, or git's ext::
// transport, would run it as root.
func TestFetchCardsRunsNothingTheAddressNames(t *testing.T) {
	git := needs.Program(t, "git", "git")
	dir := t.TempDir()
	for name, src := range map[string]func(canary string) string{
		"option":   func(c string) string { return "--upload-pack=touch " + c + ";" },
		"ext":      func(c string) string { return "ext::sh -c touch% " + c },
		"ext .git": func(c string) string { return "ext::sh -c touch% " + c + "% .git" },
	} {
		t.Run(name, func(t *testing.T) {
			canary := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".canary")
			_, err := FetchCards(context.Background(), t.TempDir(), src(canary))
			if err == nil {
				t.Fatal("fetched")
			}
			if _, serr := os.Stat(canary); serr == nil {
				t.Fatalf("the address ran a command as this user: %s exists", canary)
			}
		})
	}
	// Control: the same ext:: address, allowed, does run its command.
	canary := filepath.Join(dir, "control.canary")
	cmd := exec.Command(git, "-c", "protocol.ext.allow=always", "clone", "ext::sh -c touch% "+canary, filepath.Join(dir, "x"))
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	if _, err := os.Stat(canary); err != nil {
		t.Fatalf("control: ext:: allowed did not run its command (%v): the test above proves nothing", err)
	}
}
