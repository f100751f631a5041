package test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTestingDocCompilesAndRuns: every Go block of docs/testing.md is a file of one
// package, named in its first line ("// receipts_test.go"); the blocks compile together as
// they are printed, inside this module (an overlay: the directory does not exist, so the
// test binary is built, without go vet, and run in a directory of its own), and
// every test they hold runs and passes.
func TestTestingDocCompilesAndRuns(t *testing.T) {
	md, root := readFile(t, "docs/testing.md")
	dir := t.TempDir()
	pkg := filepath.Join(root, "internal", "testingdoc")
	replace := map[string]string{}
	var tests []string
	for _, f := range fences(md) {
		if f.lang != "go" {
			continue
		}
		first, _, _ := strings.Cut(f.text, "\n")
		name, ok := strings.CutPrefix(first, "// ")
		if !ok || !strings.HasSuffix(name, ".go") || strings.ContainsAny(name, "/ ") {
			t.Fatalf("docs/testing.md:%d: a Go block must start with its file's name (// name.go), not %q", f.line, first)
		}
		if _, dup := replace[filepath.Join(pkg, name)]; dup {
			t.Fatalf("docs/testing.md:%d: %s twice", f.line, name)
		}
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(pkg, name)] = file
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllStringSubmatch(f.text, -1) {
			tests = append(tests, m[1])
		}
	}
	if len(tests) < 5 {
		t.Fatalf("docs/testing.md holds %d tests %v: the page's examples are not all found", len(tests), tests)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bin := filepath.Join(dir, "testingdoc.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-vet=off", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, "./internal/testingdoc")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docs/testing.md's code does not compile as printed: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, bin, "-test.v", "-test.count=1")
	run.Dir = dir
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/testing.md's tests fail: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("docs/testing.md's %s did not pass:\n%s", name, out)
		}
	}
}
