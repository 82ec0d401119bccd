package root

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stem-edu/stem/internal/testenv"
)

// TestReadmeLayoutMatchesTheTree: the README's Layout block names every
// program under cmd/ and every package directly under internal/, and
// everything it names exists. A line's first column lists paths split by
// ", "; a bare name is a sibling of the path before it, and "dir/..."
// covers a whole tree.
func TestReadmeLayoutMatchesTheTree(t *testing.T) {
	t.Parallel()
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "## Layout\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no Layout block")
	}
	named := map[string]bool{}
	col := regexp.MustCompile(`^(\S+(?:, \S+)*)\s{2,}\S`)
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		m := col.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("layout line without a name column: %q", line)
			continue
		}
		parent := ""
		for _, item := range strings.Split(m[1], ", ") {
			item = strings.TrimSuffix(item, "/")
			if strings.Contains(item, "/") {
				parent = filepath.Dir(strings.TrimSuffix(item, "/..."))
			} else {
				item = filepath.Join(parent, item)
			}
			named[item] = true
			if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(item, "/..."))); err != nil {
				t.Errorf("the layout names %s, which does not exist", item)
			}
		}
	}
	covered := func(p string) bool {
		for n := range named {
			if n == p || strings.HasSuffix(n, "/...") && (strings.TrimSuffix(n, "/...") == p || strings.HasPrefix(p, strings.TrimSuffix(n, "..."))) {
				return true
			}
		}
		return false
	}
	var missing []string
	for _, dir := range []string{"cmd", "internal"} {
		ents, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if p := dir + "/" + e.Name(); e.IsDir() && !covered(p) {
				missing = append(missing, p)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("README.md's Layout does not name: %s", strings.Join(missing, ", "))
	}
}

// TestLibKnowsNothingOfStem: a package under internal/lib imports nothing
// of stem but other lib packages (docs/design.md, "Where code lives").
func TestLibKnowsNothingOfStem(t *testing.T) {
	t.Parallel()
	const mod = "github.com/stem-edu/stem/"
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}}", "./internal/lib/...")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./internal/lib/...: %v", err)
	}
	pkgs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d lib packages:\n%s", len(pkgs), out)
	}
	for _, line := range pkgs {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) && !strings.HasPrefix(imp, mod+"internal/lib/") {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
}
