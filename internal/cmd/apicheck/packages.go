package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// pkg is a public package of one of the modules.
type pkg struct {
	path string // import path
	name string // package name, as callers qualify its names
	dir  string // the directory of its module, where apidiff runs
	file string // its API file's name: see apiFile
}

// publicPackages lists the packages of the modules in dirs that are not
// commands, not internal and not excluded, sorted by import path, and
// returns the path of the first module, the primary one.
func publicPackages(dirs []string, exclude *regexp.Regexp) (primary string, _ []pkg, _ error) {
	primary, err := goOutput(dirs[0], "list", "-m")
	if err != nil {
		return "", nil, err
	}
	primary = strings.TrimSpace(primary)
	var pkgs []pkg
	for _, dir := range dirs {
		out, err := goOutput(dir, "list", "-f", "{{.ImportPath}}\t{{.Name}}", "./...")
		if err != nil {
			return "", nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			path, name, ok := strings.Cut(line, "\t")
			if !ok || name == "main" || internal(path) || exclude.MatchString(path) {
				continue
			}
			pkgs = append(pkgs, pkg{path: path, name: name, dir: dir, file: fileName(primary, path)})
		}
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	return primary, pkgs, nil
}

// internal reports whether path is under an internal directory.
func internal(path string) bool {
	for _, el := range strings.Split(path, "/") {
		if el == "internal" {
			return true
		}
	}
	return false
}

// fileName names a package's API file: its path below the primary module's
// path with "/" as "-", the last element of the module path for the module's
// root package ("idem"), the whole path so written for another module.
func fileName(primary, path string) string {
	switch {
	case path == primary:
		return primary[strings.LastIndex(primary, "/")+1:]
	case strings.HasPrefix(path, primary+"/"):
		return strings.ReplaceAll(strings.TrimPrefix(path, primary+"/"), "/", "-")
	default:
		return strings.ReplaceAll(path, "/", "-")
	}
}

// pathOf is the import path of the package whose API file is named file:
// fileName's inverse for the primary module's packages.
func pathOf(primary, file string) string {
	if file == primary[strings.LastIndex(primary, "/")+1:] {
		return primary
	}
	return primary + "/" + strings.ReplaceAll(file, "-", "/")
}

// apiFile is where the API of p in release version is kept; with p's zero
// value, the release's directory.
func apiFile(apiDir, version string, p pkg) string {
	if p.file == "" {
		return filepath.Join(apiDir, version)
	}
	return filepath.Join(apiDir, version, p.file+".api")
}

// goOutput runs the go command in dir and returns its standard output.
func goOutput(dir string, args ...string) (string, error) {
	return output(dir, "go", args...)
}

// output runs name in dir and returns its standard output; an error carries
// its standard error.
func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// writeAPI writes the API of p to file with apidiff -w.
func writeAPI(apidiff, file string, p pkg) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	_, err = output(p.dir, absTool(apidiff), "-w", abs, p.path)
	return err
}

// absTool makes a tool's path that names a file absolute, so that it still
// names it where the tool runs in another directory; a bare name is looked
// up on PATH.
func absTool(tool string) string {
	if !strings.ContainsRune(tool, filepath.Separator) {
		return tool
	}
	if abs, err := filepath.Abs(tool); err == nil {
		return abs
	}
	return tool
}
