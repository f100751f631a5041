package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// testEnd is closed shortly before the test's deadline (go test -timeout), so that a demo
// that never prints what a test waits for fails with its output rather than a panic; the
// wait itself asserts nothing about time.
func testEnd(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) - 10*time.Second)
}

// waitFor waits until a line containing s appears.
func (o *output) waitFor(t *testing.T, s string) string {
	t.Helper()
	end := testEnd(t)
	for {
		select {
		case line, ok := <-o.ch:
			if !ok {
				t.Fatalf("output ended without %q:\n%s", s, o)
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-end:
			t.Fatalf("no %q in the output by the test's deadline:\n%s", s, o)
		}
	}
}

// waitForBatch returns the next line the live consumer prints for a batch it
// ran, passing over invocations that outlived the consumer's timeout (a cold
// start on a busy machine), which the queue redelivers.
func (o *output) waitForBatch(t *testing.T) string {
	t.Helper()
	for {
		if line := o.waitFor(t, "consumer: batch of"); !strings.Contains(line, "function timed out") {
			return line
		}
	}
}

// printedBlock returns the shell lines of the block of steps under title in out.
func printedBlock(t *testing.T, out, title string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n"+title+"\n\n")
	if !ok {
		t.Fatalf("no block titled %q in the output:\n%s", title, out)
	}
	body, _, _ := strings.Cut(rest, "\n\n")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		line, ok := strings.CutPrefix(l, stepIndent)
		if !ok {
			t.Fatalf("block %q: line %q is not indented as a step", title, l)
		}
		lines = append(lines, line)
	}
	return lines
}

// shell runs script with bash in dir, in an environment without the caller's AWS settings
// (a new terminal), and returns its combined output, failing the test if it exits non-zero.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "IDEM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed steps failed (%v):\n%s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

// runSteps runs the lines of a block as printed, in order, in one shell, marking where each
// numbered step starts, and returns each step's output by number.
func runSteps(t *testing.T, dir string, lines []string) map[int]string {
	t.Helper()
	var script strings.Builder
	stepRE := regexp.MustCompile(`^# (\d+)\. `)
	for _, l := range lines {
		if m := stepRE.FindStringSubmatch(l); m != nil {
			script.WriteString("echo '@@step " + m[1] + "'\n")
		}
		script.WriteString(l + "\n")
	}
	out := shell(t, dir, script.String())
	steps := map[int]string{}
	for _, part := range strings.Split(out, "@@step ")[1:] {
		n, text, _ := strings.Cut(part, "\n")
		i, _ := strconv.Atoi(n)
		steps[i] = text
	}
	return steps
}

// The demo's script, then the steps it prints, run as printed, in order, in another shell:
// the poison message inspected, released and redriven by hand, then an order placed and
// replayed with curl; then Ctrl-C: exit 0 with every server stopped.
func TestDemo(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	bin := t.TempDir()
	cmd := exec.CommandContext(t.Context(), buildDemo(t), "-addr", "127.0.0.1:0", "-bin", bin)
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
	defer func() { _ = cmd.Process.Kill() }()
	out := collect(stdout)
	out.waitFor(t, endOfSteps)
	checkScript(t, out.String())

	dir := t.TempDir()
	steps := runSteps(t, dir, printedBlock(t, out.String(), operatorTitle))
	checkOperatorSteps(t, dir, steps)
	if line := out.waitForBatch(t); !strings.Contains(line, "executed; deleted 1, reported none; ledger entries: 2") {
		t.Errorf("after the redrive the consumer printed %q, want the poison message executed once (ledger entries: 2)", line)
	}

	order := printedBlock(t, out.String(), orderTitle)
	curl := order[len(order)-3:] // the curl command, three lines with its continuations
	answers := shell(t, dir, strings.Join(append(order, curl...), "\n"))
	if n := strings.Count(answers, "HTTP/1.1 201 Created"); n != 2 || strings.Count(answers, "Idempotent-Replayed: true") != 1 {
		t.Errorf("the order and its repetition answered (want two 201s, the second replayed):\n%s", answers)
	}
	if line := out.waitForBatch(t); !strings.Contains(line, "executed; deleted 1, reported none; ledger entries: 3") {
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
	// What each step must show, whatever the machine's speed: an invocation that
	// outlives the consumer's timeout (a cold start on a busy machine) is redelivered
	// after the visibility timeout, which adds a batch line and a receive, never an
	// outcome. So the batch lines are matched by outcome, and the receive counts only
	// where no timed-out invocation came before.
	for _, c := range []struct{ step, want string }{
		{"1", `-> 201 Created, order_id `},
		{"2", `-> 201 Created, Idempotent-Replayed: true, order_id .* \(same order: yes\)`},
		{"3", `-> 422 Unprocessable Entity, problem: Idempotency-Key reused\n.*orders in the table: 1; messages in orders-demo: 1($|\n)`},
		{"4", `-> batch of 1 \(receive count \d+\): (failed_transiently, )?executed; deleted 1, reported none; ledger entries: 1($|\n)`},
		{"5", `\): replayed(, replayed)?; deleted [12], reported none; ledger entries: 1($|\n)`},
		{"6", `-> batch of 1 \(receive count \d+\): failed_permanently; deleted none, reported 1; ledger entries: 1($|\n)`},
		{"6", `-> the queue's redrive policy moved it to orders-demo-dlq`},
	} {
		if !regexp.MustCompile(c.want).MatchString(stepText(out, c.step)) {
			t.Errorf("step %s lacks %q:\n%s", c.step, c.want, out)
		}
	}
	for _, step := range []string{"4", "5", "6"} {
		for _, line := range regexp.MustCompile(`-> batch of .*`).FindAllString(stepText(out, step), -1) {
			if strings.Contains(line, "executed") && step != "4" || strings.Contains(line, "invocation failed") && !strings.Contains(line, "function timed out") {
				t.Errorf("step %s: batch %q", step, line)
			}
		}
	}
	summary := `summary: 3 requests -> 1 order; 3 deliveries of its event -> 1 ledger entry; the poison message: \d+ receives, ` +
		`then orders-demo-dlq \(holding 1\); no duplicate side effects\n`
	if !regexp.MustCompile(summary).MatchString(out) {
		t.Errorf("output lacks %q:\n%s", summary, out)
	}
}

// stepText is what the script printed for its step n, up to the next step or
// the summary.
func stepText(out, n string) string {
	_, rest, ok := strings.Cut(out, "\nstep "+n+": ")
	if !ok {
		return ""
	}
	end := regexp.MustCompile(`\n(step \d+: |summary: )`).FindStringIndex(rest)
	if end == nil {
		return rest
	}
	return rest[:end[0]]
}

// checkOperatorSteps asserts on what each of the operator's steps printed and left.
func checkOperatorSteps(t *testing.T, dir string, steps map[int]string) {
	t.Helper()
	if len(steps) != 7 {
		t.Fatalf("ran %d steps, want 7: %v", len(steps), steps)
	}
	data, err := os.ReadFile(filepath.Join(dir, "dlq.json"))
	var doc struct{ Messages []struct{ Body string } }
	if err != nil || json.Unmarshal(data, &doc) != nil || len(doc.Messages) != 1 || !strings.Contains(doc.Messages[0].Body, `"fail":"poison"`) {
		t.Errorf("step 3 left dlq.json = %s (%v), want the poison message", data, err)
	}
	for n, wants := range map[int][]string{
		3: {"idem: 1 message of ", ", left in the queue"},
		4: {"state:        failed-permanent\n", "error:        orders: poison message (test hook)\n", "action append-ledger"},
		5: {"orders-consumer deployed without its test hooks\n"},
		6: {"\nreleased: the record of key hash "},
		7: {"moved 1 message from "},
	} {
		for _, want := range wants {
			if !strings.Contains(steps[n], want) {
				t.Errorf("step %d printed (want %q):\n%s", n, want, steps[n])
			}
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
	if strings.Contains(msg, "goroutine") || strings.Contains(msg, "panic") {
		t.Errorf("want only the message, got stderr:\n%s", msg)
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

func TestPathExport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain path", "/work/idem/.cache/bin", `export PATH="/work/idem/.cache/bin:$PATH"`},
		{"space", "/home/a b/bin", `export PATH='/home/a b/bin':"$PATH"`},
		{"quote", "/tmp/it's", `export PATH='/tmp/it'\''s':"$PATH"`},
		{"dollar", "/tmp/$HOME", `export PATH='/tmp/$HOME':"$PATH"`},
	} {
		if got := pathExport(tc.in); got != tc.want {
			t.Errorf("%s: pathExport(%q) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
		out, err := exec.Command("bash", "-c", "PATH=/usr/bin:/bin; "+pathExport(tc.in)+`; printf %s "${PATH%%:*}"`).Output()
		if err != nil || string(out) != tc.in {
			t.Errorf("%s: in bash, %s puts %q first on PATH (%v), want %q", tc.name, pathExport(tc.in), out, err, tc.in)
		}
	}
}
