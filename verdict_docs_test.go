package idem_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// verdictNames are the names of idem.Verdicts(), in order.
func verdictNames() []string {
	var out []string
	for _, v := range idem.Verdicts() {
		out = append(out, v.String())
	}
	return out
}

// TestREADMEListsTheVerdicts: the README's verdict list names every verdict
// in order, and no other.
func TestREADMEListsTheVerdicts(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "Each call ends in one **verdict**")
	if start < 0 {
		t.Fatal("README.md has no verdict list")
	}
	end := strings.Index(text[start:], "Logs, wrappers, metrics")
	if end < 0 {
		t.Fatal("README.md's verdict list has no end")
	}
	list := text[start : start+end]
	list = list[strings.Index(list, "):")+2:] // after the parenthesis naming Outcome.Verdict
	var got []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(list, -1) {
		got = append(got, m[1])
	}
	if want := verdictNames(); !slices.Equal(got, want) {
		t.Errorf("README.md lists the verdicts\n%v\nwant\n%v", got, want)
	}
}

// TestVerdictTable: the verdict table of docs/errors-and-retries.md has a
// row per verdict, in order, with its log level.
func TestVerdictTable(t *testing.T) {
	b, err := os.ReadFile("docs/errors-and-retries.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| ([A-Z]+) \\|")
	var got, levels []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			got, levels = append(got, m[1]), append(levels, m[2])
		}
	}
	if want := verdictNames(); !slices.Equal(got, want) {
		t.Fatalf("docs/errors-and-retries.md's verdict table has\n%v\nwant\n%v", got, want)
	}
	for i, v := range idem.Verdicts() {
		if levels[i] != v.Level().String() {
			t.Errorf("%s: the table says %s, Level is %s", v, levels[i], v.Level())
		}
	}
}
