//go:build samcheck

package test

import (
	"debug/buildinfo"
	"debug/elf"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/devserver"
)

// TestBuiltBootstraps checks what sam build wrote: for each function of the
// template, a bootstrap that is an executable, static, stripped linux/arm64 ELF
// built from the function's CodeUri with buildFlags. make sam-check runs it
// (with -tags samcheck) right after sam build and sets IDEM_SAM_BUILD_DIR: a
// missing build is a failure, never a skip.
func TestBuiltBootstraps(t *testing.T) {
	dir := os.Getenv("IDEM_SAM_BUILD_DIR")
	if dir == "" {
		t.Fatal("IDEM_SAM_BUILD_DIR is not set: run make sam-check")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("sam build's output: %v", err)
	}
	documented := documentedSizes(t)
	for _, fn := range functions {
		t.Run(fn.resource, func(t *testing.T) {
			path := filepath.Join(dir, fn.resource, "bootstrap")
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&0o111 == 0 {
				t.Errorf("mode %v: Lambda cannot execute it", fi.Mode())
			}
			t.Logf("%s: %d bytes", path, fi.Size())
			if d := documented[fn.resource]; math.Abs(float64(fi.Size()-d)) > 0.1*float64(d) {
				t.Errorf("built %d bytes; docs/deployment.md's stripping table gives %d: measure again and update it", fi.Size(), d)
			}
			checkELF(t, path)
			checkBuildInfo(t, path, devserver.ModulePath+"/"+fn.pkg)
		})
	}
}

// checkELF: a 64-bit little-endian arm64 executable without an interpreter
// (static), without a symbol table or DWARF (stripped).
func checkELF(t *testing.T, path string) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
		t.Errorf("ELF %v %v %v %v, want ELFCLASS64 ELFDATA2LSB EM_AARCH64 ET_EXEC", f.Class, f.Data, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("has a %v program header: dynamically linked (CGO_ENABLED=0 missing?)", p.Type)
		}
	}
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("has section %s: not stripped (-ldflags=-s -w missing?)", s.Name)
		}
	}
}

// checkBuildInfo: the main package and the build settings that the go command
// recorded in the binary.
func checkBuildInfo(t *testing.T, path, mainPkg string) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Path != mainPkg || bi.Main.Path != devserver.ModulePath {
		t.Errorf("built %s of module %s, want %s of %s", bi.Path, bi.Main.Path, mainPkg, devserver.ModulePath)
	}
	got := map[string]string{}
	for _, s := range bi.Settings {
		got[s.Key] = s.Value
	}
	for k, want := range wantBuildSettings {
		if got[k] != want {
			t.Errorf("build setting %s = %q want %q", k, got[k], want)
		}
	}
}

// documentedSizes returns the stripped sizes docs/deployment.md's table gives, by
// function resource.
func documentedSizes(t *testing.T) map[string]int64 {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	row := regexp.MustCompile("(?m)^\\| `(\\w+Function)` \\|.*\\| ([0-9,]+) B \\([^|]*\\) \\|$")
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		n, err := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sizes[m[1]] = n
	}
	for _, fn := range functions {
		if sizes[fn.resource] == 0 {
			t.Errorf("docs/deployment.md's stripping table gives no size for %s", fn.resource)
		}
	}
	return sizes
}
