package durable_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/invokeserver"
	"github.com/idemgo/idem/internal/webhooktest"
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
	"another Lambda error (`AccessDeniedException`)": func(t *testing.T, r *rig) (string, bool) {
		r.srv.Fail(invokeserver.Forbidden)
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"an error no classifier knows (no credentials to sign the Invoke)": func(t *testing.T, r *rig) (string, bool) {
		r.d = noCredentials(t, r)
		return deliver(t, r, newSandbox(t), order("o-1", 10))
	},
	"a start whose record the store refuses": func(t *testing.T, r *rig) (string, bool) {
		return deliver(t, r, refusingSandbox(t), order("o-1", 10))
	},
}

// httpScenarios answers, for each row of docs/durable.md's table of HTTP
// requests, the request the row names, through a GitHub dispatcher, and
// returns its verdict and answer.
var httpScenarios = map[string]func(t *testing.T, r *rig) (string, answer){
	"a new delivery": func(t *testing.T, r *rig) (string, answer) {
		return request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
	},
	"a redelivery the runner remembers": func(t *testing.T, r *rig) (string, answer) {
		s := webhookSandbox(t)
		request1(t, r, s, githubPush("d-1", pushBody))
		return request1(t, r, s, githubPush("d-1", pushBody))
	},
	"a redelivery the runner has no memory of": func(t *testing.T, r *rig) (string, answer) {
		request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
		return request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
	},
	"another body, refused by the runner's fingerprint": func(t *testing.T, r *rig) (string, answer) {
		s := webhookSandbox(t)
		request1(t, r, s, githubPush("d-1", pushBody))
		return request1(t, r, s, githubPush("d-1", pushBody+" "+pushBody))
	},
	"another body, refused by Lambda": func(t *testing.T, r *rig) (string, answer) {
		request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
		return request1(t, r, webhookSandbox(t), githubPush("d-1", `{"zen":"Keep it logically awesome."}`))
	},
	"a payload over 1 MB": func(t *testing.T, r *rig) (string, answer) {
		return request1(t, r, webhookSandbox(t), githubPush("d-1", `{"pad":"`+strings.Repeat("x", 1<<20)+`"}`))
	},
	"throttling (429 `TooManyRequestsException`)": func(t *testing.T, r *rig) (string, answer) {
		r.srv.Fail(invokeserver.Throttle)
		return request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
	},
	"a Lambda 5xx (`ServiceException`)": func(t *testing.T, r *rig) (string, answer) {
		r.srv.Fail(invokeserver.ServiceError)
		return request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
	},
	"another Lambda error (`AccessDeniedException`)": func(t *testing.T, r *rig) (string, answer) {
		r.srv.Fail(invokeserver.Forbidden)
		return request1(t, r, webhookSandbox(t), githubPush("d-1", pushBody))
	},
	"a signature that does not verify": func(t *testing.T, r *rig) (string, answer) {
		req := githubPush("d-1", pushBody)
		req.headers["X-Hub-Signature-256"] = webhooktest.GitHubSignature("another secret", pushBody)
		return request1(t, r, webhookSandbox(t), req)
	},
	"a start whose record the store refuses": func(t *testing.T, r *rig) (string, answer) {
		return request1(t, r, refusingSandbox(t, idem.WithRetention(72*time.Hour)), githubPush("d-1", pushBody))
	},
	"no delivery id": func(t *testing.T, r *rig) (string, answer) {
		req := githubPush("d-1", pushBody)
		delete(req.headers, "X-GitHub-Delivery")
		return request1(t, r, webhookSandbox(t), req)
	},
}

// request1 sends req through s's GitHub dispatcher and returns its verdict
// and answer.
func request1(t *testing.T, r *rig, s *sandbox, req request) (string, answer) {
	t.Helper()
	s.take()
	a := s.send(t, r, req)
	v := s.verdicts()
	if len(v) != 1 {
		t.Fatalf("verdicts %v, want one", v)
	}
	return v[0], a
}

// TestHTTPVerdictTable holds docs/durable.md's table of HTTP requests to
// the code: every row's request gets the row's verdict, status, problem
// type and replay mark; every scenario has its row.
func TestHTTPVerdictTable(t *testing.T) {
	section := durableSection(t, "## Verdicts")
	_, section, ok := strings.Cut(section, "\n### HTTP requests\n")
	if !ok {
		t.Fatal("docs/durable.md's Verdicts have no HTTP requests table")
	}
	problem := regexp.MustCompile("`([a-z-]+)`")
	eachRow(t, section, "(?m)^\\| (.+?) \\| `(\\w+)` \\| (\\d{3})(.*) \\|$", httpScenarios,
		func(t *testing.T, m []string, scenario func(*testing.T, *rig) (string, answer)) {
			v, a := scenario(t, newRig(t))
			var typ string
			if p := problem.FindStringSubmatch(m[4]); p != nil {
				typ = p[1]
			}
			replayed := strings.Contains(m[4], "Idempotent-Replayed: true")
			if v != m[2] || fmt.Sprint(a.status) != m[3] || a.problem() != typ || (a.headers["idempotent-replayed"] == "true") != replayed {
				t.Errorf("verdict %s, answer %+v; the table says %s, %s%s", v, a, m[2], m[3], m[4])
			}
		})
}

// eachRow runs, for each row of section that pattern matches (its first
// group the scenario's name), the row's scenario, as a subtest; every
// scenario must have its row, every row its scenario.
func eachRow[S any](t *testing.T, section, pattern string, scenarios map[string]S, run func(*testing.T, []string, S)) {
	t.Helper()
	rows := regexp.MustCompile(pattern).FindAllStringSubmatch(section, -1)
	if len(rows) != len(scenarios) {
		t.Errorf("the table has %d rows, the test %d scenarios", len(rows), len(scenarios))
	}
	for _, m := range rows {
		scenario, ok := scenarios[m[1]]
		if !ok {
			t.Errorf("row %q has no scenario", m[1])
			continue
		}
		t.Run(m[1], func(t *testing.T) { run(t, m, scenario) })
	}
}

// durableSection returns the part of docs/durable.md under heading, up to
// the next heading of its level.
func durableSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/durable.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/durable.md has no section %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n"+heading[:strings.IndexByte(heading, ' ')+1])
	return section
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
	section, _, _ := strings.Cut(durableSection(t, "## Verdicts"), "\n### ")
	eachRow(t, section, "(?m)^\\| (.+?) \\| `(\\w+)` \\| (yes|no) \\|$", verdictScenarios,
		func(t *testing.T, m []string, scenario func(*testing.T, *rig) (string, bool)) {
			v, reported := scenario(t, newRig(t))
			if v != m[2] || reported != (m[3] == "yes") {
				t.Errorf("verdict %s, reported %v; the table says %s, %s", v, reported, m[2], m[3])
			}
		})
}
