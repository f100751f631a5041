package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version describes the build of the command from its build information:
// the module version `go install github.com/idemgo/idem/cmd/idem@VERSION`
// stamps, or, for a build from a clone (go build, go install ./cmd/idem),
// the pseudo-version the go command derives from the checkout (Go 1.24
// and later) with its commit, and "+dirty" when the checkout had
// uncommitted changes; "(devel)" when the go command had no version control
// information (a copy of the sources without .git, or -buildvcs=false).
func version(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "idem (unknown version: built without module information)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	v := bi.Main.Version
	var b strings.Builder
	fmt.Fprintf(&b, "idem %s", orDevel(v))
	if bi.Main.Path != "" {
		fmt.Fprintf(&b, " (module %s", bi.Main.Path)
		if bi.GoVersion != "" {
			fmt.Fprintf(&b, ", %s", bi.GoVersion)
		}
		b.WriteString(")")
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "\nbuilt from a checkout: commit %s", rev[:min(len(rev), 12)])
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " of %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
	} else if v == "" || v == "(devel)" {
		b.WriteString("\nbuilt from a source tree without version control information")
	}
	return b.String()
}

func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}

// printVersion writes the command's version to stdout.
func (c *cli) printVersion() int {
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(c.stdout, version(bi, ok))
	return exitOK
}
