package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// changelog is what apicheck reads of CHANGELOG.md.
type changelog struct {
	// base is the last release, "v0.1.0".
	base string
	// breaking is the text of the Unreleased section's Breaking changes,
	// HTML comments removed.
	breaking string
}

var (
	// releaseRE matches a release heading: "## [Unreleased]", "## [0.1.0] - 2026-12-03".
	releaseRE = regexp.MustCompile(`^## \[([^\]]+)\]`)
	// semverRE matches a released version in a heading (no "v").
	semverRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	// versionRE matches the version -record takes.
	versionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	// commentRE matches an HTML comment, which may span lines.
	commentRE = regexp.MustCompile(`(?s)<!--.*?-->`)
)

// breakingHeading is the subsection of Unreleased that records the breaks.
const breakingHeading = "### Breaking changes"

// parseChangelog finds the Unreleased section's breaking changes and the
// release after it.
func parseChangelog(text string) (changelog, error) {
	text = commentRE.ReplaceAllString(text, "")
	var log changelog
	var section string // the release heading's name while inside one
	var inBreaking, sawUnreleased bool
	var breaking []string
	for _, line := range strings.Split(text, "\n") {
		if m := releaseRE.FindStringSubmatch(line); m != nil {
			section, inBreaking = m[1], false
			if section == "Unreleased" {
				sawUnreleased = true
				continue
			}
			if !sawUnreleased {
				return changelog{}, fmt.Errorf("release %s comes before ## [Unreleased]", section)
			}
			if !semverRE.MatchString(section) {
				return changelog{}, fmt.Errorf("release heading [%s]: want a version X.Y.Z", section)
			}
			log.base = "v" + section
			break
		}
		if section != "Unreleased" {
			continue
		}
		if strings.HasPrefix(line, "### ") || strings.HasPrefix(line, "## ") {
			inBreaking = strings.EqualFold(strings.TrimSpace(line), breakingHeading)
			continue
		}
		if inBreaking {
			breaking = append(breaking, line)
		}
	}
	if !sawUnreleased {
		return changelog{}, errors.New("no ## [Unreleased] section")
	}
	if log.base == "" {
		return changelog{}, errors.New("no release after ## [Unreleased]: nothing to compare with")
	}
	log.breaking = strings.Join(breaking, "\n")
	return log, nil
}

// recorded reports whether the breaking changes name sym, a package-qualified
// name ("idemlambda.WithLogger", "idem.Runner.Report") or an import path, as a
// whole name: "idem.Runner" is not named by "idem.Runner.Report" or
// "idem.RunnerX", but may end a sentence ("... idem.Runner."). A method may be
// written (*idem.Runner).Report.
func recorded(breaking, sym string) bool {
	text := strings.NewReplacer("(*", "", ").", ".").Replace(breaking)
	re := regexp.MustCompile(`(?:^|[^\w.*/-])` + regexp.QuoteMeta(sym) + `(?:$|[^\w./]|[./](?:$|[^\w]))`)
	return re.MatchString(text)
}
