package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runScript runs the demo's script with args and returns its output.
func runScript(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, append([]string{"-script-only", "-addr", "127.0.0.1:0"}, args...), &out, &errOut); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	return out.String()
}

// checkScript asserts on the script's printed steps and summary.
func checkScript(t *testing.T, out string) {
	t.Helper()
	ids := regexp.MustCompile(`order_id (ord_[0-9a-f]{16})`).FindAllStringSubmatch(out, -1)
	if len(ids) != 2 || ids[0][1] != ids[1][1] {
		t.Errorf("want the same order id in steps 1 and 2, got %v", ids)
	}
	for _, want := range []string{
		"step 1: POST /orders with a new Idempotency-Key\n        -> 201 Created, order_id ",
		"-> 201 Created, Idempotent-Replayed: true, order_id ",
		"(same order: yes)",
		"-> 422 Unprocessable Entity, problem: Idempotency-Key reused",
		"orders in the table: 1\n",
		"step 4: deliver the 1 queued OrderPlaced message(s) to the consumer\n        -> reported for redelivery: none; ledger entries: 1\n",
		"step 5: SQS delivers the same message again, twice in one batch (at-least-once)\n        -> reported for redelivery: none; ledger entries: 1\n",
		"summary: 3 requests -> 1 order; 3 deliveries -> 1 ledger entry; no duplicate side effects\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoMemory(t *testing.T) {
	out := runScript(t, "-memory")
	checkScript(t, out)
	if !strings.Contains(out, "(in-memory store and tables)") {
		t.Errorf("output does not say it ran in memory:\n%s", out)
	}
}

func TestDemoDynalite(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	out := runScript(t) // fails with "run `make deps`" when dynalite is not installed
	checkScript(t, out)
	start := regexp.MustCompile(`started dynalite at http://127\.0\.0\.1:\d+ \(pid (\d+)\)`).FindStringSubmatch(out)
	if start == nil {
		t.Fatalf("output does not report dynalite's start:\n%s", out)
	}
	if !strings.Contains(out, "stopped dynalite (pid "+start[1]+")") {
		t.Errorf("output does not report stopping dynalite pid %s:\n%s", start[1], out)
	}
	if _, err := os.Stat("/proc/" + start[1]); err == nil {
		if cmdline, _ := os.ReadFile("/proc/" + start[1] + "/cmdline"); strings.Contains(string(cmdline), "dynalite") {
			t.Errorf("dynalite (pid %s) still runs after the demo", start[1])
		}
	}
}

func TestDemoRefusesOtherHosts(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-memory", "-script-only", "-addr", "0.0.0.0:0"}, &out, &errOut); err == nil {
		t.Fatal("the demo accepted to serve on 0.0.0.0")
	}
}
