package test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/devserver"
)

// TestFuzzTargetsListed checks that docs/development.md's table of fuzz
// targets lists every func Fuzz of the repository, in its package, and
// nothing else, each with how long it was last run.
func TestFuzzTargetsListed(t *testing.T) {
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	inCode := fuzzTargets(t, root)
	if len(inCode) < 10 {
		t.Fatalf("found %d fuzz targets in the code: %v; the search is broken", len(inCode), inCode)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(Fuzz\\w+)` \\| `([\\w/.]+)` \\|(.*)\\|$")
	var inDocs []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		inDocs = append(inDocs, m[2]+"."+m[1])
		if !regexp.MustCompile(`\d+ s\b`).MatchString(m[3]) {
			t.Errorf("%s: the row says for how long it was run in neither of its cells: %s", m[1], m[3])
		}
	}
	slices.Sort(inDocs)
	if !slices.Equal(inCode, inDocs) {
		t.Errorf("docs/development.md lists the fuzz targets\n%v\nthe code has\n%v", inDocs, inCode)
	}
}

// fuzzTargets returns "package-dir.FuzzName" for every func Fuzz in the
// repository's test files, sorted.
func fuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			out = append(out, filepath.ToSlash(rel)+"."+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
