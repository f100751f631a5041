package durable_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/invokeserver"
)

// verdictScenarios delivers, for each row of docs/durable.md's verdict
// table, the event the row names, and returns its verdict and whether it
// was reported.
var verdictScenarios = map[string]func(t *testing.T, r *rig) (string, bool){
	"a new event": func(t *testing.T, r *rig) (string, bool) {
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"a duplicate the runner remembers (in the batch, in the sandbox, or in a table)": func(t *testing.T, r *rig) (string, bool) {
		s := newSandbox(t)
		deliver(t, r, s, order("o-1", 10))
		return deliver(t, r, s, order("o-1", 10))
	},
	"a redelivery the runner has no memory of": func(t *testing.T, r *rig) (string, bool) {
		deliver(t, r, newSandbox(t), order("o-1", 10))
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"another payload, refused by the runner's fingerprint": func(t *testing.T, r *rig) (string, bool) {
		s := newSandbox(t)
		deliver(t, r, s, order("o-1", 10))
		return deliver(t, r, s, order("o-1", 11))
	},
	"another payload, refused by Lambda": func(t *testing.T, r *rig) (string, bool) {
		deliver(t, r, newSandbox(t), order("o-1", 10))
		return deliver(t, r, newSandbox(t), order("o-1", 11))
	},
	"a payload over 1 MB": func(t *testing.T, r *rig) (string, bool) {
		return deliver(t, r, newSandbox(t), `{"order_id":"o-1","pad":"`+strings.Repeat("x", 1<<20)+`"}`)
	},
	"throttling (429 `TooManyRequestsException`)": func(t *testing.T, r *rig) (string, bool) {
		r.srv.Fail(invokeserver.Throttle, invokeserver.Throttle, invokeserver.Throttle)
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"a Lambda 5xx (`ServiceException`)": func(t *testing.T, r *rig) (string, bool) {
		r.srv.Fail(invokeserver.ServiceError, invokeserver.ServiceError, invokeserver.ServiceError)
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"no key in the event": func(t *testing.T, r *rig) (string, bool) {
		return deliver(t, r, newSandbox(t), `{"amount":10}`)
	},
}

// deliver sends one message with body through s and returns its verdict and
// whether it was reported.
func deliver(t *testing.T, r *rig, s *sandbox, body string) (string, bool) {
	t.Helper()
	s.take()
	reported := s.sqs(t, r.d, batch("", body))
	v := s.verdicts()
	if len(v) != 1 {
		t.Fatalf("verdicts %v, want one", v)
	}
	return v[0], len(reported) == 1
}

// TestVerdictTable holds docs/durable.md's verdict table to the code: every
// row's event, delivered, gets the row's verdict and is reported as the row
// says; every scenario has its row.
func TestVerdictTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/durable.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Verdicts\n")
	if !ok {
		t.Fatal("docs/durable.md has no Verdicts section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| (.+?) \\| `(\\w+)` \\| (yes|no) \\|$")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) != len(verdictScenarios) {
		t.Errorf("the table has %d rows, the test %d scenarios", len(rows), len(verdictScenarios))
	}
	for _, m := range rows {
		scenario, ok := verdictScenarios[m[1]]
		if !ok {
			t.Errorf("row %q has no scenario", m[1])
			continue
		}
		t.Run(m[1], func(t *testing.T) {
			v, reported := scenario(t, newRig(t))
			if v != m[2] || reported != (m[3] == "yes") {
				t.Errorf("verdict %s, reported %v; the table says %s, %s", v, reported, m[2], m[3])
			}
		})
	}
}
