package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildDemo builds this command into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// output collects a process's output and says when a line appears.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan string
}

func collect(r io.Reader) *output {
	o := &output{ch: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			o.mu.Lock()
			o.buf.WriteString(sc.Text() + "\n")
			o.mu.Unlock()
			o.ch <- sc.Text()
		}
		close(o.ch)
	}()
	return o
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until a line containing s appears (at most 3 minutes: the script itself
// takes seconds, a cold build of the idem command longer).
func (o *output) waitFor(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case line, ok := <-o.ch:
			if !ok {
				t.Fatalf("output ended without %q:\n%s", s, o)
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("no %q in the output after 3 minutes:\n%s", s, o)
		}
	}
}

// The demo's script, its live event source mapping, and Ctrl-C: exit 0 with every server
// stopped.
func TestDemo(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	cmd := exec.CommandContext(t.Context(), buildDemo(t), "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "IDEM_DEMO_SCRIPT_ONLY=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := collect(stdout)
	base := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(out.waitFor(t, "idem demo: orders API on"))
	out.waitFor(t, "run until Ctrl-C")
	checkScript(t, out.String())

	// The live event source mapping consumes what the API publishes.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/orders",
		strings.NewReader(`{"customer_id":"c-7","items":[{"sku":"mug","qty":1,"price_cents":900}]}`))
	req.Header.Set("Idempotency-Key", "order-live-1")
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /orders: %v, %v", resp, err)
	}
	resp.Body.Close()
	if line := out.waitFor(t, "consumer: batch of"); !strings.Contains(line, "executed; deleted 1, reported none; ledger entries: 3") {
		t.Errorf("live consumer printed %q, want the new order's entry executed (ledger entries: 3)", line)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	for range out.ch { // the rest of the output
	}
	if err != nil {
		t.Fatalf("demo exited with %v after SIGINT, want 0\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	checkStopped(t, out.String())
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
		"orders in the table: 1; messages in orders-demo: 1\n",
		"step 4: the event source mapping polls orders-demo and invokes orders-consumer\n" +
			"        -> batch of 1 (receive count 1): executed; deleted 1, reported none; ledger entries: 1\n",
		"(receive count 1, 1): replayed, replayed; deleted 2, reported none; ledger entries: 1\n",
		"-> batch of 1 (receive count 1): failed_permanently; deleted none, reported 1; ledger entries: 1\n",
		"-> batch of 1 (receive count 2): replayed_failure; deleted none, reported 1; ledger entries: 1\n",
		"-> the queue's redrive policy moved it to orders-demo-dlq",
		"$ idem inspect --sqs-event dlq.json --key-source body:event_id --action append-ledger\n",
		"        state:        failed-permanent\n",
		"        error:        orders: poison message (test hook)\n",
		"$ idem release --sqs-event dlq.json --key-source body:event_id --action append-ledger --fence failed/1/",
		"        released: the record of key hash ",
		"-> 1 message(s) moved\n        -> batch of 1 (receive count 1): executed; deleted 1, reported none; ledger entries: 2\n",
		"summary: 3 requests -> 1 order; 3 deliveries of its event -> 1 ledger entry; the poison message: 2 receives, " +
			"dead-letter queue, released, redriven -> 1 ledger entry (2 in all); queues empty: yes; no duplicate side effects\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// checkStopped asserts that the servers the demo started were stopped.
func checkStopped(t *testing.T, out string) {
	t.Helper()
	for _, name := range []string{"dynalite", "moto"} {
		start := regexp.MustCompile(`started ` + name + ` at http://127\.0\.0\.1:\d+ \(pid (\d+)\)`).FindStringSubmatch(out)
		if start == nil {
			t.Errorf("output does not report %s's start:\n%s", name, out)
			continue
		}
		if !strings.Contains(out, "stopped "+name+" (pid "+start[1]+")") {
			t.Errorf("output does not report stopping %s pid %s:\n%s", name, start[1], out)
		}
		if cmdline, err := os.ReadFile("/proc/" + start[1] + "/cmdline"); err == nil && strings.Contains(string(cmdline), name) {
			t.Errorf("%s (pid %s) still runs after the demo", name, start[1])
		}
	}
}

// Without the local servers installed, the demo says what to run and exits 1, with no
// stack trace.
func TestDemoNotInstalled(t *testing.T) {
	bin := buildDemo(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/idemgo/idem\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-script-only")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want code 1\nstderr:\n%s", err, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{"the local servers are not installed", "dynalite", "moto", "Run `make demo`", "`make deps`"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "goroutine") || strings.Contains(msg, "panic") || stdout.Len() != 0 {
		t.Errorf("want only the message, got stdout %q, stderr:\n%s", stdout.String(), msg)
	}
}

func TestDemoRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-script-only", "-addr", "0.0.0.0:0"}, &out, &errOut); err == nil {
		t.Fatal("the demo accepted to serve on 0.0.0.0")
	}
}

func TestIdemEnv(t *testing.T) {
	t.Parallel()
	got := idemEnv([]string{"PATH=/bin", "AWS_PROFILE=prod", "AWS_DEFAULT_PROFILE=x", "IDEM_TABLE=other", "HOME=/h"},
		map[string]string{"IDEM_TABLE": "demo-idempotency"})
	want := []string{"PATH=/bin", "HOME=/h", "IDEM_TABLE=demo-idempotency"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("idemEnv = %q, want %q", got, want)
	}
}

func TestField(t *testing.T) {
	t.Parallel()
	out := "table:        t\nfence:        failed/1/abc\n\nreleased: yes\n"
	tests := []struct{ name, field, want string }{
		{name: "present", field: "fence:", want: "failed/1/abc"},
		{name: "first line", field: "table:", want: "t"},
		{name: "absent", field: "lease end:", want: ""},
	}
	for _, tt := range tests {
		if got := field(out, tt.field); got != tt.want {
			t.Errorf("%s: field(%q) = %q, want %q", tt.name, tt.field, got, tt.want)
		}
	}
}
