package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/devserver"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-03T10:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	main := func(v string) debug.Module { return debug.Module{Path: "github.com/idemgo/idem", Version: v} }
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("v1.2.3")},
			"idem v1.2.3 (module github.com/idemgo/idem, go1.26.0)"},
		{"clone build", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("v0.0.0-20261203100000-0123456789ab"), Settings: vcs("0123456789abcdef0123", "false")},
			"idem v0.0.0-20261203100000-0123456789ab (module github.com/idemgo/idem, go1.26.0)\nbuilt from a checkout: commit 0123456789ab of 2026-12-03T10:00:00Z"},
		{"clone build with changes", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("v0.0.0-20261203100000-0123456789ab+dirty"), Settings: vcs("0123456789abcdef0123", "true")},
			"idem v0.0.0-20261203100000-0123456789ab+dirty (module github.com/idemgo/idem, go1.26.0)\nbuilt from a checkout: commit 0123456789ab of 2026-12-03T10:00:00Z, with uncommitted changes"},
		{"sources without version control", &debug.BuildInfo{GoVersion: "go1.26.0", Main: main("(devel)")},
			"idem (devel) (module github.com/idemgo/idem, go1.26.0)\nbuilt from a source tree without version control information"},
		{"no build information", nil, "idem (unknown version: built without module information)"},
	}
	for _, tc := range tests {
		if got := version(tc.bi, tc.bi != nil); got != tc.want {
			t.Errorf("%s: version =\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestVersionFlag runs --version on the command built from this checkout, as `go build` and
// `go install ./cmd/idem` build it in a clone: the commit of the checkout. Where the go
// command cannot stamp one (no .git directory: a copy of the sources, or a git worktree,
// whose .git is a file), the words that say why there is none.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	buildvcs, want := "-buildvcs=false", "\nbuilt from a source tree without version control information"
	git := exec.CommandContext(t.Context(), "git", "rev-parse", "HEAD")
	git.Dir = root
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		if rev, err := git.Output(); err == nil {
			buildvcs, want = "-buildvcs=true", "\nbuilt from a checkout: commit "+strings.TrimSpace(string(rev))[:12]
		}
	}
	bin := filepath.Join(t.TempDir(), "idem")
	build := exec.CommandContext(t.Context(), "go", "build", buildvcs, "-o", bin, "./cmd/idem")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--version", "version"} {
		var out bytes.Buffer
		cmd := exec.CommandContext(t.Context(), bin, arg)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("idem %s: %v", arg, err)
		}
		if s := out.String(); !strings.HasPrefix(s, "idem v") && !strings.HasPrefix(s, "idem (devel)") || !strings.Contains(s, "(module github.com/idemgo/idem, go1.") || !strings.Contains(s, want) {
			t.Errorf("idem %s printed %q, want the module's version and %q", arg, s, want)
		}
	}
}
