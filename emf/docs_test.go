package emf

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocsListTheMetrics: the metric table of docs/observability.md and
// the package documentation name exactly the metrics the documents carry,
// with their units.
func TestDocsListTheMetrics(t *testing.T) {
	b, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []metric
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| metric | unit |"):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			got = append(got, metric{Name: strings.Trim(strings.TrimSpace(cells[1]), "`"), Unit: strings.TrimSpace(cells[2])})
		default:
			in = false
		}
	}
	if !slices.Equal(got, metrics) {
		t.Errorf("docs/observability.md lists %v, the documents carry %v", got, metrics)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " ")
	for _, m := range metrics {
		if !strings.Contains(text, m.Name) {
			t.Errorf("the package documentation does not name the metric %s", m.Name)
		}
	}
}
