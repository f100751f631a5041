package httprule

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/devserver"
)

func readDoc(t *testing.T, name string) string {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the part of md under heading, up to the next heading of its level or
// above.
func section(t *testing.T, md, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no section %q", heading)
	}
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		if h := len(l) - len(strings.TrimLeft(l, "#")); h > 0 && h <= level && strings.HasPrefix(l[h:], " ") {
			return strings.Join(lines[:i], "\n")
		}
	}
	return rest
}

// TestReadmeProblemTypes: the README's problem types are the wrappers' own, with their
// statuses.
func TestReadmeProblemTypes(t *testing.T) {
	md := section(t, readDoc(t, "README.md"), "## Problem types")
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`<a id="([a-z-]+)"></a>\*\*([a-z-]+)\*\* \((\d{3})`).FindAllStringSubmatch(md, -1) {
		if m[1] != m[2] {
			t.Errorf("anchor %q names problem %q", m[1], m[2])
		}
		got[m[2]], _ = strconv.Atoi(m[3])
	}
	want := map[string]int{}
	for name, s := range specs {
		want[name] = s.status
	}
	if !maps.Equal(got, want) {
		t.Errorf("README's problem types = %v, the code's = %v", got, want)
	}
}

// TestStatusTables: every row of the HTTP status table (docs/lambda.md) and of the
// middleware's draft table (docs/http.md) that names a problem gives the status the code
// answers it with; the Lambda table names every problem the Lambda wrappers answer.
func TestStatusTables(t *testing.T) {
	lambdaTable := section(t, readDoc(t, "docs/lambda.md"), "### The HTTP status table")
	named := map[string]bool{}
	for _, row := range tableRows(lambdaTable) {
		if len(row) != 4 {
			continue
		}
		problems := regexp.MustCompile("problem `([a-z-]+)`(?: / `([a-z-]+)`)?").FindStringSubmatch(row[3])
		if problems == nil {
			continue
		}
		statuses := regexp.MustCompile(`^(\d{3})(?: / (\d{3}))?`).FindStringSubmatch(row[1])
		if statuses == nil {
			t.Errorf("lambda.md row %q: status %q, want the status of problem %s", row[0], row[1], problems[1])
			continue
		}
		for i := 1; i <= 2; i++ {
			if problems[i] == "" {
				continue
			}
			named[problems[i]] = true
			if want := specs[problems[i]].status; strconv.Itoa(want) != statuses[i] {
				t.Errorf("lambda.md row %q: problem %s with status %q, the code answers %d", row[0], problems[i], statuses[i], want)
			}
		}
	}
	for name := range specs {
		if !named[name] && name != BodyTooLarge && name != StartUnavailable { // the net/http middleware's and package durable's
			t.Errorf("lambda.md's HTTP status table does not name problem %s", name)
		}
	}
	checkDurableTable(t)

	httpTable := section(t, readDoc(t, "docs/http.md"), "## The status table")
	pairs := regexp.MustCompile("(\\d{3}) `([a-z-]+)`").FindAllStringSubmatch(httpTable, -1)
	if len(pairs) < 4 {
		t.Errorf("http.md's status table names %d statuses with problems, want the draft's scenarios", len(pairs))
	}
	for _, p := range pairs {
		s, ok := specs[p[2]]
		if !ok || strconv.Itoa(s.status) != p[1] {
			t.Errorf("http.md gives %s %s, the code answers %s with %d", p[1], p[2], p[2], s.status)
		}
	}
	if !strings.Contains(httpTable, "with 413 for a body over the\nlimit") || specs[BodyTooLarge].status != 413 {
		t.Errorf("http.md does not give 413 for %s as the code does (%d)", BodyTooLarge, specs[BodyTooLarge].status)
	}
}

// checkDurableTable: the table of docs/durable.md that says what an HTTP dispatcher answers
// for a start gives the status the code answers each problem with, and names the problems
// only package durable answers.
func checkDurableTable(t *testing.T) {
	t.Helper()
	named := map[string]bool{}
	for _, row := range tableRows(section(t, readDoc(t, "docs/durable.md"), "## HTTP requests and webhooks")) {
		p := regexp.MustCompile("problem `([a-z-]+)`").FindStringSubmatch(strings.Join(row, "|"))
		if len(row) != 4 || p == nil {
			continue
		}
		named[p[1]] = true
		if s, ok := specs[p[1]]; !ok || !strings.HasPrefix(row[1], strconv.Itoa(s.status)) {
			t.Errorf("durable.md row %q: problem %s with status %q, the code answers %d", row[0], p[1], row[1], s.status)
		}
	}
	for _, name := range []string{StartUnavailable, BodyTooLarge, KeyReused} {
		if !named[name] {
			t.Errorf("durable.md's table of HTTP answers does not name problem %s", name)
		}
	}
}

// tableRows returns the cells of each body row of the Markdown tables in md.
func tableRows(md string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !slices.Equal(cells, []string{"situation", "status", "headers", "body"}) {
			rows = append(rows, cells)
		}
	}
	return rows
}
