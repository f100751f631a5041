package idemlambda

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// notBatch are the verdicts no batch wrapper reaches (the HTTP and Typed
// wrappers' own).
var notBatch = []idem.Verdict{idem.ReplayOmitted, idem.ReplayCorrupt, idem.Unkeyed, idem.Unauthorized}

// TestReportTablesSayWhatTheCodeDoes: the SQS table of docs/lambda.md and the
// table of docs/streams.md name every verdict a batch wrapper reaches, and
// say of each what the code does by default (reported or not) and whether
// WithAcknowledged accepts it.
func TestReportTablesSayWhatTheCodeDoes(t *testing.T) {
	for _, tc := range []struct {
		file, header string
	}{
		{"../docs/lambda.md", "| the message's verdict | reported? | why |"},
		{"../docs/streams.md", "| the record's verdict | checkpoint? | why |"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rows := tableRows(t, tc.file, tc.header)
			byName := map[string]idem.Verdict{}
			for _, v := range idem.Verdicts() {
				byName[v.String()] = v
			}
			seen := map[idem.Verdict]bool{}
			verdictName := regexp.MustCompile("`([a-z_]+)`")
			for _, row := range rows {
				for _, m := range verdictName.FindAllStringSubmatch(row[0], -1) {
					v, ok := byName[m[1]]
					if !ok {
						continue // not a verdict name
					}
					seen[v] = true
					checkRow(t, v, row[1])
				}
			}
			for _, v := range idem.Verdicts() {
				if !seen[v] && !slices.Contains(notBatch, v) {
					t.Errorf("the table has no row for %s", v)
				}
			}
		})
	}
}

// checkRow checks what a row's "reported?" cell says of v.
func checkRow(t *testing.T, v idem.Verdict, cell string) {
	t.Helper()
	none := acknowledged{}
	switch {
	case v == idem.Blocked && strings.HasPrefix(cell, "not themselves"): // a stream's records after the checkpoint
	case strings.HasPrefix(cell, "no"):
		if none.reports(v) {
			t.Errorf("%s: the table says not reported, the code reports it", v)
		}
	case strings.HasPrefix(cell, "**yes**"):
		if !none.reports(v) {
			t.Errorf("%s: the table says reported, the code acknowledges it", v)
		}
		if opt := strings.Contains(cell, "WithAcknowledged"); opt != slices.Contains(acknowledgeable, v) {
			t.Errorf("%s: the table says WithAcknowledged accepts it: %v; the code: %v", v, opt, !opt)
		}
	default:
		t.Errorf("%s: cannot read the cell %q", v, cell)
	}
}

// tableRows returns the cells after the first of each row of the table
// under header in file.
func tableRows(t *testing.T, file, header string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			rows = append(rows, []string{strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])})
		default:
			in = false
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table %q", file, header)
	}
	return rows
}
