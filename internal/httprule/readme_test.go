package httprule

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The README's problem types list every problem type of the status table,
// with its status, and no other.
func TestREADMEProblemTypes(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`<a id="([a-z-]+)"></a>\*\*([a-z-]+)\*\* \((\d{3})`).FindAllSubmatch(readme, -1) {
		if string(m[1]) != string(m[2]) {
			t.Errorf("anchor %s names %s", m[1], m[2])
		}
		got[string(m[1])], _ = strconv.Atoi(string(m[3]))
	}
	for typ, s := range specs {
		if got[typ] != s.status {
			t.Errorf("README: %s is %d, want %d", typ, got[typ], s.status)
		}
		delete(got, typ)
	}
	for typ := range got {
		t.Errorf("README lists %s, which the code does not answer", typ)
	}
}
