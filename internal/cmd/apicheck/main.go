// Command apicheck compares the public API of idem's modules with the API of the last release
// recorded in CHANGELOG.md, so that an incompatible change is a decision, not an accident:
//
//	go run ./internal/cmd/apicheck [-apidiff PATH] [-changelog CHANGELOG.md] [-api api] [MODULE_DIR...]
//	go run ./internal/cmd/apicheck -record vX.Y.Z [-apidiff PATH] [-api api] [MODULE_DIR...]
//
// The public packages are every package of the modules in MODULE_DIR (default ".") that is not a
// command, not under an internal directory and not matched by -exclude. -record writes the API of
// each (golang.org/x/exp/cmd/apidiff's export data) to API/vX.Y.Z/NAME.api, where NAME is the
// package's path below the first module's path, with "/" as "-" ("idem" for that module's root
// package).
//
// Without -record, the last release is the first version heading of the changelog after
// "## [Unreleased]" ("## [0.1.0] - 2026-12-03" is v0.1.0), and its API is read from API/v0.1.0.
// apidiff compares each recorded package with the working tree; every incompatible change it
// reports must be named, as PACKAGE.Symbol (the package's name, as callers write it:
// idemlambda.WithLogger; a method as idem.Runner.Report or (*idem.Runner).Report), in the
// "### Breaking changes" subsection of "## [Unreleased]". A recorded package that no longer
// exists must be named there by its import path. apicheck exits 1, saying how to record the
// decision, when one is not; 2 when it cannot check.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apicheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var exclude string
	fs.StringVar(&c.apidiff, "apidiff", "apidiff", "the apidiff command (golang.org/x/exp/cmd/apidiff)")
	fs.StringVar(&c.changelog, "changelog", "CHANGELOG.md", "the changelog")
	fs.StringVar(&c.apiDir, "api", "api", "the directory of the recorded APIs, one subdirectory per release")
	fs.StringVar(&c.record, "record", "", "write the API of the working tree as this release's (vX.Y.Z) instead of checking")
	fs.StringVar(&exclude, "exclude", `^$`, "leave out the packages whose import path matches this regular expression")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	re, err := regexp.Compile(exclude)
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: -exclude: %v\n", err)
		return 2
	}
	c.exclude = re
	c.modules = fs.Args()
	if len(c.modules) == 0 {
		c.modules = []string{"."}
	}
	if c.record != "" {
		return record(c, stdout, stderr)
	}
	return check(c, stdout, stderr)
}

// config is what the flags say.
type config struct {
	apidiff, changelog, apiDir, record string
	exclude                            *regexp.Regexp
	modules                            []string
}

func record(c config, stdout, stderr io.Writer) int {
	if !versionRE.MatchString(c.record) {
		fmt.Fprintf(stderr, "apicheck: -record %q: want a version vX.Y.Z\n", c.record)
		return 2
	}
	_, pkgs, err := publicPackages(c.modules, c.exclude)
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: %v\n", err)
		return 2
	}
	for _, p := range pkgs {
		if err := writeAPI(c.apidiff, apiFile(c.apiDir, c.record, p), p); err != nil {
			fmt.Fprintf(stderr, "apicheck: %v\n", err)
			return 2
		}
	}
	fmt.Fprintf(stdout, "apicheck: recorded the API of %d packages in %s\n", len(pkgs), apiFile(c.apiDir, c.record, pkg{}))
	return 0
}

func check(c config, stdout, stderr io.Writer) int {
	text, err := os.ReadFile(c.changelog)
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: %v\n", err)
		return 2
	}
	log, err := parseChangelog(string(text))
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: %s: %v\n", c.changelog, err)
		return 2
	}
	primary, pkgs, err := publicPackages(c.modules, c.exclude)
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: %v\n", err)
		return 2
	}
	res, err := compare(c, log.base, primary, pkgs)
	if err != nil {
		fmt.Fprintf(stderr, "apicheck: %v\n", err)
		return 2
	}
	unrecorded := res.unrecorded(log.breaking)
	report(stdout, c, log.base, res, unrecorded)
	if len(unrecorded) > 0 {
		howToRecord(stderr, c, log.base, unrecorded)
		return 1
	}
	return 0
}
