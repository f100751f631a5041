package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const okChangelog = `# Changelog

## [Unreleased]

### Breaking changes

<!-- Name every symbol as package.Symbol: p.Commented is not named here. -->

- ` + "`p.Gone`" + ` is removed; (*p.T).Method takes a context.

### Added

- ` + "`p.Added`" + `.

## [0.2.0] - 2026-12-03

### Breaking changes

- ` + "`p.Old`" + ` was removed in 0.2.0.

## [0.1.0] - 2026-12-01
`

func TestParseChangelog(t *testing.T) {
	t.Parallel()
	log, err := parseChangelog(okChangelog)
	if err != nil {
		t.Fatal(err)
	}
	if log.base != "v0.2.0" {
		t.Errorf("base = %q, want v0.2.0 (the first release after Unreleased)", log.base)
	}
	for _, sym := range []string{"p.Gone", "p.T.Method"} {
		if !recorded(log.breaking, sym) {
			t.Errorf("%s is in Unreleased's breaking changes, not found in %q", sym, log.breaking)
		}
	}
	for _, sym := range []string{"p.Commented", "p.Added", "p.Old"} {
		if recorded(log.breaking, sym) {
			t.Errorf("%s is outside Unreleased's breaking changes (a comment, Added, an earlier release), found in %q", sym, log.breaking)
		}
	}
}

func TestParseChangelogRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text, want string }{
		{"no unreleased", "# Changelog\n\n## [0.1.0] - 2026-12-01\n", "comes before ## [Unreleased]"},
		{"no release", "# Changelog\n\n## [Unreleased]\n\n### Breaking changes\n\n- `p.X`\n", "no release after"},
		{"no sections", "# Changelog\n", "no ## [Unreleased]"},
		{"not a version", "## [Unreleased]\n\n## [next] - 2026-12-01\n", "want a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseChangelog(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseChangelog: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestRecorded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text, sym string
		want            bool
	}{
		{"backquoted", "- `idemlambda.WithLogger` is removed", "idemlambda.WithLogger", true},
		{"bare, ending a sentence", "removed idemlambda.WithLogger.", "idemlambda.WithLogger", true},
		{"in a list", "idem.A, idem.B and idem.C", "idem.B", true},
		{"pointer method", "`(*idem.Runner).Report` changed", "idem.Runner.Report", true},
		{"method", "`idem.Runner.Report` changed", "idem.Runner.Report", true},
		{"another package's name", "`httpidem.WithLogger` is removed", "idemlambda.WithLogger", false},
		{"a package name's suffix", "`idemlambda.WithLogger` is removed", "lambda.WithLogger", false},
		{"a longer name", "`idem.RunnerOption` is removed", "idem.Runner", false},
		{"a method of the type", "`idem.Runner.Report` changed", "idem.Runner", false},
		{"a generic instance", "aliases of `idemlambda.Source[E]`", "idemlambda.Source", true},
		{"an import path", "the package `github.com/idemgo/idem/blob` is removed", "github.com/idemgo/idem/blob", true},
		{"a sub-package's path", "`github.com/idemgo/idem/blob/x` is removed", "github.com/idemgo/idem/blob", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := recorded(tc.text, tc.sym); got != tc.want {
				t.Errorf("recorded(%q, %q) = %v, want %v", tc.text, tc.sym, got, tc.want)
			}
		})
	}
}

// apidiffOutput is apidiff -incompatible's report of idem's lambda package
// against v0.1.0 (abridged).
const apidiffOutput = `Incompatible changes:
- (*Store).Old: removed
- KeySource: changed from KeySource to Source[github.com/aws/aws-lambda-go/events.SQSMessage]
- SQSKey: changed from func(KeySource, string, github.com/aws/aws-lambda-go/events.SQSMessage) (string, error) to func(KeySource, string, github.com/aws/aws-lambda-go/events.SQSMessage) (string, error)
- WithLogger: removed
`

func TestParseDiff(t *testing.T) {
	t.Parallel()
	got := parseDiff(pkg{path: "github.com/idemgo/idem/lambda", name: "idemlambda"}, apidiffOutput)
	want := []string{"idemlambda.Store.Old", "idemlambda.KeySource", "idemlambda.SQSKey", "idemlambda.WithLogger"}
	if len(got) != len(want) {
		t.Fatalf("parseDiff: %d changes %v, want %d", len(got), got, len(want))
	}
	for i, ch := range got {
		if ch.name != want[i] || ch.pkg != "github.com/idemgo/idem/lambda" {
			t.Errorf("change %d: %+v, want the name %s", i, ch, want[i])
		}
	}
	if got[3].text != "WithLogger: removed" {
		t.Errorf("text = %q, want apidiff's line", got[3].text)
	}
}

func TestFileNames(t *testing.T) {
	t.Parallel()
	const primary = "github.com/idemgo/idem"
	for _, tc := range []struct{ path, file string }{
		{primary, "idem"},
		{primary + "/lambda", "lambda"},
		{primary + "/otel", "otel"},
		{primary + "/ddbstore/admin", "ddbstore-admin"},
	} {
		if got := fileName(primary, tc.path); got != tc.file {
			t.Errorf("fileName(%s) = %q, want %q", tc.path, got, tc.file)
		}
		if got := pathOf(primary, tc.file); got != tc.path {
			t.Errorf("pathOf(%s) = %q, want %q", tc.file, got, tc.path)
		}
	}
	if got := fileName(primary, "example.com/other/x"); got != "example.com-other-x" {
		t.Errorf("another module's package: %q", got)
	}
}

// TestCheck records the API of a module, breaks it, and checks that
// apicheck fails until the changelog names each break. It runs the real
// apidiff, which make deps installs.
func TestCheck(t *testing.T) {
	apidiff := findAPIDiff(t)
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/m\n\ngo 1.24\n")
	write(t, dir, "m.go", "// Package m is a test module.\npackage m\n\n// A is kept.\nfunc A() {}\n\n// B is removed.\nfunc B() {}\n")
	write(t, dir, "p/p.go", "// Package p is removed.\npackage p\n\n// C is removed with p.\nfunc C() {}\n")
	write(t, dir, "internal/i/i.go", "package i\n\n// I is internal: not checked.\nfunc I() {}\n")
	write(t, dir, "CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n### Breaking changes\n\n## [0.1.0] - 2026-12-01\n")
	runCheck(t, dir, 0, "-apidiff", apidiff, "-record", "v0.1.0")
	if _, err := os.Stat(filepath.Join(dir, "api", "v0.1.0", "internal-i.api")); err == nil {
		t.Error("the internal package's API was recorded")
	}
	out := runCheck(t, dir, 0, "-apidiff", apidiff)
	if !strings.Contains(out, "2 packages compared with v0.1.0") || !strings.Contains(out, "0 incompatible changes") {
		t.Errorf("unchanged API: %s", out)
	}

	write(t, dir, "m.go", "// Package m is a test module.\npackage m\n\n// A is kept.\nfunc A() {}\n\n// D is new.\nfunc D() {}\n")
	if err := os.RemoveAll(filepath.Join(dir, "p")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "q/q.go", "// Package q is new.\npackage q\n")
	out = runCheck(t, dir, 1, "-apidiff", apidiff)
	for _, want := range []string{"2 incompatible API changes since v0.1.0 are not recorded", "  m.B  (example.com/m: B: removed)",
		"  example.com/m/p  (example.com/m/p: package removed)", "new package example.com/m/q", `### Breaking changes`} {
		if !strings.Contains(out, want) {
			t.Errorf("a break not recorded: the output lacks %q:\n%s", want, out)
		}
	}

	write(t, dir, "CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n### Breaking changes\n\n- `m.B` is removed.\n\n## [0.1.0] - 2026-12-01\n")
	out = runCheck(t, dir, 1, "-apidiff", apidiff)
	if !strings.Contains(out, "1 incompatible API changes since v0.1.0 are not recorded") || strings.Contains(out, "  m.B  (") {
		t.Errorf("with m.B recorded, only the package is left:\n%s", out)
	}

	write(t, dir, "CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n### Breaking changes\n\n- `m.B` and the package `example.com/m/p` are removed.\n\n## [0.1.0] - 2026-12-01\n")
	out = runCheck(t, dir, 0, "-apidiff", apidiff)
	if !strings.Contains(out, "2 incompatible changes, 0 not recorded") {
		t.Errorf("every break recorded:\n%s", out)
	}
}

// TestCheckWithoutRecordedAPI: a release whose API was not recorded is an
// error that says how to record it.
func TestCheckWithoutRecordedAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/m\n\ngo 1.24\n")
	write(t, dir, "m.go", "package m\n")
	write(t, dir, "CHANGELOG.md", "## [Unreleased]\n\n## [0.3.0] - 2026-12-01\n")
	out := runCheck(t, dir, 2, "-apidiff", "apidiff-not-run")
	if !strings.Contains(out, "no recorded API of v0.3.0") || !strings.Contains(out, "make api-record VERSION=v0.3.0") {
		t.Errorf("output: %s", out)
	}
}

// runCheck runs apicheck in dir with args and checks its exit code; it
// returns its standard output and error.
func runCheck(t *testing.T, dir string, wantCode int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	all := append([]string{"-changelog", filepath.Join(dir, "CHANGELOG.md"), "-api", filepath.Join(dir, "api")}, args...)
	all = append(all, dir)
	code := run(all, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != wantCode {
		t.Fatalf("apicheck %s: exit %d, want %d\n%s", strings.Join(all, " "), code, wantCode, out)
	}
	return out
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// findAPIDiff returns the apidiff that make deps installs (or
// $IDEM_APIDIFF); without it the test fails, unless
// IDEM_SKIP_INTEGRATION=1 says to skip it.
func findAPIDiff(t *testing.T) string {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: the check with apidiff skipped")
	}
	path := os.Getenv("IDEM_APIDIFF")
	if path == "" {
		path = filepath.Join("..", "..", "..", ".cache", "bin", "apidiff")
	}
	abs, err := exec.LookPath(path)
	if err != nil {
		t.Fatalf("apidiff: %v: run `make deps` (or set IDEM_APIDIFF, or IDEM_SKIP_INTEGRATION=1)", err)
	}
	abs, err = filepath.Abs(abs)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
