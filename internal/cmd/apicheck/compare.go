package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// change is one incompatible change apidiff reported, or a package removed.
type change struct {
	pkg  string // import path
	name string // what the changelog must name: "idemlambda.WithLogger", or the import path
	text string // apidiff's line: "WithLogger: removed"
}

// result is what the comparison with a release found.
type result struct {
	checked int      // packages compared
	added   []string // public packages the release did not have
	changes []change
}

// compare runs apidiff on every package recorded in release base, and
// notes the packages added or removed since.
func compare(c config, base, primary string, pkgs []pkg) (result, error) {
	dir := apiFile(c.apiDir, base, pkg{})
	files, err := filepath.Glob(filepath.Join(dir, "*.api"))
	if err != nil {
		return result{}, err
	}
	if len(files) == 0 {
		return result{}, fmt.Errorf("no recorded API of %s in %s: record it from the release's commit with `make api-record VERSION=%s` (docs/development.md)", base, dir, base)
	}
	recorded := map[string]bool{}
	for _, f := range files {
		recorded[strings.TrimSuffix(filepath.Base(f), ".api")] = true
	}
	var res result
	for _, p := range pkgs {
		if !recorded[p.file] {
			res.added = append(res.added, p.path)
			continue
		}
		delete(recorded, p.file)
		out, err := output(p.dir, absTool(c.apidiff), "-incompatible", mustAbs(apiFile(c.apiDir, base, p)), p.path)
		if err != nil {
			return result{}, err
		}
		res.checked++
		res.changes = append(res.changes, parseDiff(p, out)...)
	}
	for file := range recorded {
		path := pathOf(primary, file)
		res.changes = append(res.changes, change{pkg: path, name: path, text: "package removed"})
	}
	sort.Slice(res.changes, func(i, j int) bool { return res.changes[i].pkg < res.changes[j].pkg })
	return res, nil
}

// parseDiff reads apidiff's report of p: one "- Name: what changed" line
// per change.
func parseDiff(p pkg, out string) []change {
	var cs []change
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue
		}
		sym, _, _ := strings.Cut(rest, ": ")
		sym = strings.NewReplacer("(*", "", ").", ".").Replace(sym)
		cs = append(cs, change{pkg: p.path, name: p.name + "." + sym, text: rest})
	}
	return cs
}

// unrecorded returns the changes that breaking does not name.
func (r result) unrecorded(breaking string) []change {
	var out []change
	for _, ch := range r.changes {
		if !recorded(breaking, ch.name) {
			out = append(out, ch)
		}
	}
	return out
}

func mustAbs(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// report prints what was compared and each incompatible change.
func report(w io.Writer, c config, base string, r result, unrecorded []change) {
	missing := map[change]bool{}
	for _, ch := range unrecorded {
		missing[ch] = true
	}
	fmt.Fprintf(w, "apicheck: %d packages compared with %s (%s): %d incompatible changes, %d not recorded in %s\n",
		r.checked, base, apiFile(c.apiDir, base, pkg{}), len(r.changes), len(unrecorded), c.changelog)
	for _, ch := range r.changes {
		mark := "recorded    "
		if missing[ch] {
			mark = "NOT RECORDED"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", mark, ch.pkg, short(ch.text))
	}
	for _, p := range r.added {
		fmt.Fprintf(w, "  new package %s (not in %s)\n", p, base)
	}
}

// howToRecord says what to do about the changes not recorded.
func howToRecord(w io.Writer, c config, base string, unrecorded []change) {
	fmt.Fprintf(w, "\napicheck: %d incompatible API changes since %s are not recorded in %s:\n", len(unrecorded), base, c.changelog)
	for _, ch := range unrecorded {
		fmt.Fprintf(w, "  %s  (%s: %s)\n", ch.name, ch.pkg, short(ch.text))
	}
	fmt.Fprintf(w, `
A break of the API is a decision, not an accident. Either undo the change (keep the old
name, add a new one beside it, deprecate the old), or record the decision: in %s,
under "## [Unreleased]", in the subsection "%s", add an entry that names
each symbol above as written here (a method may be written (*pkg.Type).Method) and says
what users must change. See docs/development.md, "API compatibility".
`, c.changelog, breakingHeading)
}

// short cuts apidiff's line of a change to 160 bytes: a changed signature
// is printed twice, whole.
func short(s string) string {
	const limit = 160
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
