package cardgit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv/needs"
)

func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func paths(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestNestedFindsEveryKind(t *testing.T) {
	card := t.TempDir()
	outside := t.TempDir()
	mkdirs(t, card, ".git/hooks", "t1/x/.git", "t2", "t3/deep/er", ".stem/instances/a/.git", "t4/bare/refs", "t4/bare/objects")
	write(t, filepath.Join(card, "t2/.git"), "gitdir: /somewhere\n")
	write(t, filepath.Join(card, "t4/bare/HEAD"), "ref: refs/heads/main\n")
	if err := os.Symlink(outside, filepath.Join(card, "t3/deep/er/.git")); err != nil {
		t.Fatal(err)
	}
	// A symlink to a directory holding a repository is not followed.
	mkdirs(t, outside, "elsewhere/.git")
	if err := os.Symlink(filepath.Join(outside, "elsewhere"), filepath.Join(card, "t1/link")); err != nil {
		t.Fatal(err)
	}
	got, err := Nested(context.Background(), card)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(card, ".stem/instances/a/.git"),
		filepath.Join(card, "t1/x/.git"),
		filepath.Join(card, "t2/.git"),
		filepath.Join(card, "t3/deep/er/.git"),
		filepath.Join(card, "t4/bare"),
	}
	if strings.Join(paths(got), "\n") != strings.Join(want, "\n") {
		t.Fatalf("found\n%s\nwant\n%s", strings.Join(paths(got), "\n"), strings.Join(want, "\n"))
	}
	kinds := map[string]string{}
	for _, f := range got {
		kinds[f.Path] = f.What
	}
	for p, w := range map[string]string{"t1/x/.git": "a .git directory", "t2/.git": "a .git file", "t3/deep/er/.git": "a .git symlink", "t4/bare": "a bare repository"} {
		if !strings.HasPrefix(kinds[filepath.Join(card, p)], w) {
			t.Errorf("%s: %q, want %q", p, kinds[filepath.Join(card, p)], w)
		}
	}
}

func TestNestedCleanCardAndRootBare(t *testing.T) {
	card := t.TempDir()
	mkdirs(t, card, ".git/objects", ".git/refs", "t1/src")
	write(t, filepath.Join(card, ".git/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(card, "t1/src/main.c"), "int main(){}\n")
	got, err := Nested(context.Background(), card)
	if err != nil || len(got) != 0 {
		t.Fatalf("clean card: %v %v", got, err)
	}
	// With an empty .git (stem's, for a card that is not a repository),
	// git on the host would take the card root itself for a bare
	// repository if it looked like one.
	mkdirs(t, card, "refs", "objects")
	write(t, filepath.Join(card, "HEAD"), "ref: refs/heads/main\n")
	got, _ = Nested(context.Background(), card)
	if len(got) != 1 || got[0].Path != card {
		t.Fatalf("root bare repository: %v", got)
	}
}

func TestCheckReportsReplacedGit(t *testing.T) {
	ctx := context.Background()
	card := t.TempDir()
	mkdirs(t, card, ".git")
	id, err := Prepare(card)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, card, id); err != nil {
		t.Fatalf("untouched card: %v", err)
	}
	// The attack of the issue: rename .git aside and put a copy in its place.
	if err := os.Rename(filepath.Join(card, ".git"), filepath.Join(card, ".git-old")); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, card, ".git/hooks")
	err = Check(ctx, card, id)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != filepath.Join(card, ".git") || ce.Problems[0].Nested {
		t.Fatalf("replaced .git: %v", err)
	}
	if !strings.Contains(err.Error(), "another directory") || !strings.Contains(err.Error(), "stemctl rm") {
		t.Errorf("message: %v", err)
	}
	// A symlink or a gitdir: file in its place.
	os.RemoveAll(filepath.Join(card, ".git"))
	os.Symlink(filepath.Join(card, ".git-old"), filepath.Join(card, ".git"))
	if err := Check(ctx, card, id); err == nil || !strings.Contains(err.Error(), "a symlink now") {
		t.Errorf("symlink: %v", err)
	}
	os.Remove(filepath.Join(card, ".git"))
	write(t, filepath.Join(card, ".git"), "gitdir: .git-old\n")
	if err := Check(ctx, card, id); err == nil || !strings.Contains(err.Error(), "gitdir: file now") {
		t.Errorf("gitdir file: %v", err)
	}
	os.Remove(filepath.Join(card, ".git"))
	if err := Check(ctx, card, id); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("gone: %v", err)
	}
	// Without a record (an instance of an older stem) only nested
	// repositories and a .git that is not a directory or file count.
	if err := Check(ctx, card); err != nil {
		t.Errorf("no record, no .git: %v", err)
	}
}

func TestCheckReportsNested(t *testing.T) {
	card := t.TempDir()
	id, err := Prepare(card)
	if err != nil {
		t.Fatal(err)
	}
	mkdirs(t, card, "t1/x/.git/hooks")
	err = Check(context.Background(), card, id)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(card, "t1/x/.git")+" is a .git directory (a nested repository)") || !strings.Contains(err.Error(), "rm -rf") {
		t.Fatalf("nested: %v", err)
	}
	if strings.Contains(err.Error(), "stemctl rm") {
		t.Errorf("a nested repository alone needs no re-created instance: %v", err)
	}
}

func TestPrepare(t *testing.T) {
	// Not a repository: stem makes an empty .git, so the container cannot.
	card := t.TempDir()
	id, err := Prepare(card)
	if err != nil || id.Kind != KindDir {
		t.Fatalf("prepare: %v %v", id, err)
	}
	if fi, err := os.Lstat(filepath.Join(card, ".git")); err != nil || !fi.IsDir() {
		t.Fatalf("empty .git not made: %v", err)
	}
	again, err := Prepare(card)
	if err != nil || !again.Same(id) {
		t.Fatalf("second prepare: %v %v", again, err)
	}
	// A symlink is refused.
	card2, target := t.TempDir(), t.TempDir()
	os.Symlink(target, filepath.Join(card2, ".git"))
	if _, err := Prepare(card2); err == nil || !strings.Contains(err.Error(), "a symlink") {
		t.Errorf("symlink .git: %v", err)
	}
	// A gitdir: file naming a directory inside the card is refused, one
	// outside is taken.
	card3 := t.TempDir()
	mkdirs(t, card3, "real")
	write(t, filepath.Join(card3, ".git"), "gitdir: real\n")
	if _, err := Prepare(card3); err == nil || !strings.Contains(err.Error(), "inside the card") {
		t.Errorf("gitdir inside: %v", err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(card3, ".git"), "gitdir: "+outside+"\n")
	id3, err := Prepare(card3)
	if err != nil || id3.Kind != KindFile {
		t.Errorf("gitdir outside: %v %v", id3, err)
	}
	if d, err := GitDir(card3); err != nil || d != outside {
		t.Errorf("GitDir: %q %v", d, err)
	}
}

func TestMountedIn(t *testing.T) {
	root := t.TempDir()
	card := "/home/s/ws/inf/bss"
	mkdirs(t, root, card+"/.git")
	id, err := Inspect(filepath.Join(root, card))
	if err != nil {
		t.Fatal(err)
	}
	if err := mountedIn(root, card, id); err != nil {
		t.Fatalf("same .git: %v", err)
	}
	other := id
	other.Ino++
	if err := mountedIn(root, card, other); err == nil || !strings.Contains(err.Error(), "another .git") {
		t.Fatalf("other .git: %v", err)
	}
	// A symlink on the way in the container's root is not followed.
	os.Rename(filepath.Join(root, "home/s/ws"), filepath.Join(root, "home/s/ws2"))
	os.Symlink("ws2", filepath.Join(root, "home/s/ws"))
	if err := mountedIn(root, card, id); err == nil {
		t.Fatal("a symlink in the card's path was followed")
	}
}

func TestMessageQuotesControlBytes(t *testing.T) {
	card := t.TempDir()
	mkdirs(t, card, "t1/\x1b]0;pwned\x07/.git")
	err := Check(context.Background(), card)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), `\x1b]0;pwned\a`) {
		t.Fatalf("message: %q", err)
	}
}

func TestNestedLimit(t *testing.T) {
	card := t.TempDir()
	for i := 0; i < 12; i++ {
		mkdirs(t, card, fmt.Sprintf("t1/d%d", i))
	}
	if _, err := nested(context.Background(), card, 10); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "keep large generated trees out of the card") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := nested(context.Background(), card, 100); err != nil {
		t.Fatalf("under the limit: %v", err)
	}
}

func TestRacy(t *testing.T) {
	card := t.TempDir()
	mkdirs(t, card, ".git", "t1/objects", "t2", ".stem/x")
	write(t, filepath.Join(card, "t1/HEAD"), "ref: refs/heads/main\n")
	os.Symlink("/etc", filepath.Join(card, "t2/l"))
	os.Symlink("/etc", filepath.Join(card, ".stem/x/l"))
	// The student's own: not reported.
	if fs, n, err := Racy(context.Background(), card, 10); err != nil || n != 0 || len(fs) != 0 {
		t.Fatalf("the student's own files: %v %d %v", fs, n, err)
	}
	// Another uid's (the test runs as root, who can chown).
	needs.Root(t, "give files another owner")
	for _, p := range []string{"t1/HEAD", "t1/objects", "t2/l", ".stem/x/l"} {
		if err := os.Lchown(filepath.Join(card, p), 2000000000, 2000000000); err != nil {
			t.Fatal(err)
		}
	}
	fs, n, err := Racy(context.Background(), card, 2)
	if err != nil || n != 3 || len(fs) != 2 {
		t.Fatalf("got %v %d %v", fs, n, err)
	}
	note := RacyNote(fs, n)
	for _, want := range []string{"and 1 more", "stemctl commit", "racy"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}
}
