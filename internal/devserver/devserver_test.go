package devserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// integration skips t when IDEM_SKIP_INTEGRATION=1 and returns the repository root.
func integration(t *testing.T) string {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// need fails t on err, with a "run make deps" hint when a prerequisite is missing.
func need(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) {
		t.Fatalf("%v: run `make deps` first (or set IDEM_SKIP_INTEGRATION=1)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds, and reports false only if it still does not hold
// shortly before the test's deadline (go test -timeout): the wait is for an event (a
// signal delivered, a line written), bounded by the test, never a duration asserted.
func eventually(t *testing.T, cond func() bool) bool {
	t.Helper()
	end, ok := t.Deadline()
	for {
		if cond() {
			return true
		}
		if ok && time.Until(end) < 10*time.Second || t.Context().Err() != nil {
			return cond()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGroupGone waits until no live process is left in process group pgid (groupGone):
// SIGKILL is delivered asynchronously, and a loaded machine may take a moment to end the
// group's processes after Stop returned.
func waitGroupGone(t *testing.T, pgid int) bool {
	t.Helper()
	return eventually(t, func() bool { return groupGone(pgid) })
}

// groupGone reports whether no live process is left in process group pgid. Zombies do not
// count: a killed grandchild stays one until init reaps it, which can take a second here.

func groupGone(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return true
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return false
		}
	}
	return true
}

// callClient makes the tests' API calls. Its timeout only guards against a
// hung server: a server's first call of a service can take seconds on a busy
// machine (moto loads the service's backend then), unlike a readiness poll.
var callClient = &http.Client{Transport: noProxy(), Timeout: time.Minute}

// ddbCall posts a DynamoDB JSON request with a syntactically valid (unchecked) signature.

func ddbCall(t *testing.T, endpoint, op, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "+
		"SignedHeaders=host;x-amz-date, Signature=0000000000000000000000000000000000000000000000000000000000000000")
	resp, err := callClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFreePort(t *testing.T) {
	t.Parallel()
	// Another process may take the port before we bind it (other tests start servers at
	// the same time): one success in a few tries shows FreePort works.
	var errs []error
	for range 5 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port <= 0 || port > 65535 {
			t.Fatalf("FreePort() = %d, want a port number", port)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			l.Close()
			return
		}
		errs = append(errs, err)
	}
	t.Fatalf("could not listen on any port FreePort returned: %v", errs)
}

func TestListensOn(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if !listensOn(os.Getpid(), port) {
		t.Errorf("listensOn(self, %d) = false, want true", port)
	}
	// PID 1 is not this test: the socket is not its.
	if os.Getpid() != 1 && listensOn(1, port) {
		t.Errorf("listensOn(1, %d) = true, want false", port)
	}
	free, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if listensOn(os.Getpid(), free) {
		t.Errorf("listensOn(self, unused port %d) = true, want false", free)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	t.Parallel()
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("freePorts(5) = %v, want distinct ports", ports)
		}
		seen[p] = true
	}
}

func TestRepoRoot(t *testing.T) {
	t.Parallel()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePathOf(filepath.Join(root, "go.mod")); got != ModulePath {
		t.Fatalf("module of %s/go.mod = %q, want %q", root, got, ModulePath)
	}
	wd, _ := os.Getwd()
	if !strings.HasPrefix(wd, root) {
		t.Fatalf("RepoRoot() = %q, not above the working directory %q", root, wd)
	}
}

func TestModulePathOf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, gomod, want string
	}{
		{name: "plain", gomod: "module github.com/idemgo/idem\n\ngo 1.26\n", want: ModulePath},
		{name: "quoted", gomod: "// comment\nmodule \"github.com/idemgo/idem\"\n", want: ModulePath},
		{name: "other module", gomod: "module example.com/idem\n", want: "example.com/idem"},
		{name: "no module line", gomod: "go 1.26\nmodulex foo\n", want: ""},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, []byte(tt.gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := modulePathOf(path); got != tt.want {
			t.Errorf("%s: modulePathOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestLogBufferKeepsNewest(t *testing.T) {
	t.Parallel()
	b := newLogBuffer(100)
	for i := range 50 {
		if _, err := b.Write([]byte(strconv.Itoa(i) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	s := b.String()
	if !strings.HasSuffix(s, "48\n49\n") {
		t.Errorf("String() ends %q, want the newest lines", s[max(0, len(s)-20):])
	}
	if !strings.HasPrefix(s, "[... ") {
		t.Errorf("String() = %q, want a note about dropped output", s)
	}
	if got, want := b.Tail(2), "48\n49"; got != want {
		t.Errorf("Tail(2) = %q, want %q", got, want)
	}
}

func TestNotInstalled(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	if _, err := StartDynalite(t.Context(), empty); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartDynalite(empty root) error = %v, want ErrNotInstalled", err)
	}
	if _, err := StartMoto(t.Context(), empty); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartMoto(empty root) error = %v, want ErrNotInstalled", err)
	}
	if _, err := StartRIE(t.Context(), filepath.Join(empty, "aws-lambda-rie"), "/bin/true", nil); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartRIE(missing binary) error = %v, want ErrNotInstalled", err)
	}
}

func TestLookupRIE(t *testing.T) { // not parallel: it sets IDEM_RIE
	dir := t.TempDir()
	bin := filepath.Join(dir, ".cache", "bin", "aws-lambda-rie")
	t.Setenv("IDEM_RIE", "")
	if _, err := LookupRIE(dir); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("LookupRIE(no binary) error = %v, want ErrNotInstalled", err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := LookupRIE(dir); got != bin || err != nil {
		t.Errorf("LookupRIE(root) = %q, %v, want %q", got, err, bin)
	}
	other := filepath.Join(dir, "other-rie")
	if err := os.WriteFile(other, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDEM_RIE", other)
	if got, err := LookupRIE(dir); got != other || err != nil {
		t.Errorf("LookupRIE with IDEM_RIE = %q, %v, want %q", got, err, other)
	}
}

func TestStopReportsEarlyExit(t *testing.T) {
	t.Parallel()
	p, err := startProcess(t.Context(), "sh", []string{"/bin/sh", "-c", "echo bye; exit 3"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	err = p.stop()
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("stop() after exit = %v, want an error with exit status 3", err)
	}
	if again := p.stop(); again != err {
		t.Errorf("second stop() = %v, want the first result %v", again, err)
	}
	if got := p.log.String(); got != "bye\n" {
		t.Errorf("log = %q, want %q", got, "bye\n")
	}
}

func TestStopKillsWholeGroup(t *testing.T) {
	t.Parallel()
	// The shell ignores SIGTERM and its child sleeps: Stop must fall back to SIGKILL and
	// leave nothing in the group.
	p, err := startProcess(t.Context(), "sh", []string{"/bin/sh", "-c", "trap '' TERM; sleep 60 & echo ready; wait"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// The shell says when it has installed its trap and forked.
	if !eventually(t, func() bool { return strings.Contains(p.log.String(), "ready") }) {
		t.Fatalf("the shell never got ready: %q", p.log.String())
	}
	start := time.Now()
	if err := p.stop(); err != nil {
		t.Fatalf("stop() = %v", err)
	}
	if d := time.Since(start); d < StopGrace {
		t.Errorf("stop() took %v, want at least StopGrace (%v) before SIGKILL", d, StopGrace)
	}
	if !waitGroupGone(t, p.pid) {
		t.Errorf("process group %d still has processes after stop()", p.pid)
	}
}

func checkStopped(t *testing.T, name string, pid int, stop func() error, endpoint string) {
	t.Helper()
	if err := stop(); err != nil {
		t.Errorf("%s Stop() = %v", name, err)
	}
	if err := stop(); err != nil {
		t.Errorf("%s second Stop() = %v, want nil", name, err)
	}
	if !waitGroupGone(t, pid) {
		t.Errorf("%s process group %d still has processes after Stop", name, pid)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections at %s after Stop", name, endpoint)
	}
}

func TestDynalite(t *testing.T) {
	t.Parallel()
	root := integration(t)
	start := time.Now()
	s, err := StartDynalite(t.Context(), root)
	need(t, err)
	t.Logf("dynalite ready at %s (pid %d) in %v", s.Endpoint, s.PID, time.Since(start))
	defer func() {
		if t.Failed() {
			t.Logf("dynalite log:\n%s", s.Log())
		}
	}()
	if s.Name != "dynalite" || !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Errorf("Server = %+v, want dynalite on http://127.0.0.1:PORT", s)
	}
	if code, body := ddbCall(t, s.Endpoint, "ListTables", "{}"); code != http.StatusOK || !strings.Contains(body, "TableNames") {
		t.Errorf("ListTables = %d %s, want 200 with TableNames", code, body)
	}
	checkStopped(t, "dynalite", s.PID, s.Stop, s.Endpoint)
}

func TestDynaliteStopsWithContext(t *testing.T) {
	t.Parallel()
	root := integration(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := StartDynalite(ctx, root)
	need(t, err)
	cancel()
	if !waitGroupGone(t, s.PID) {
		t.Fatalf("dynalite (pid %d) still running after its context was canceled", s.PID)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop() after the context stopped it = %v, want nil", err)
	}
}

func TestMoto(t *testing.T) {
	t.Parallel()
	root := integration(t)
	start := time.Now()
	s, err := StartMoto(t.Context(), root)
	need(t, err)
	t.Logf("moto ready at %s (pid %d) in %v", s.Endpoint, s.PID, time.Since(start))
	defer func() {
		if t.Failed() {
			t.Logf("moto log:\n%s", s.Log())
		}
	}()
	if code, body := ddbCall(t, s.Endpoint, "ListTables", "{}"); code != http.StatusOK || !strings.Contains(body, "TableNames") {
		t.Errorf("ListTables = %d %s, want 200 with TableNames", code, body)
	}
	checkStopped(t, "moto", s.PID, s.Stop, s.Endpoint)
}

func TestRIE(t *testing.T) {
	t.Parallel()
	root := integration(t)
	rieBin, err := LookupRIE(root)
	need(t, err)
	bootstrap, err := BuildBootstrap(t.Context(), root, "./internal/devserver/testdata/echo", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := StartRIE(t.Context(), rieBin, bootstrap, []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=5", "ECHO_MARK=from-env"})
	need(t, err)
	t.Logf("RIE ready at %s (pid %d) in %v", r.InvokeURL, r.PID, time.Since(start))
	defer func() {
		if t.Failed() {
			t.Logf("RIE log:\n%s", r.Log())
		}
	}()
	if !strings.HasPrefix(r.InvokeURL, "http://127.0.0.1:") || !strings.HasSuffix(r.InvokeURL, "/2015-03-31/functions/function/invocations") {
		t.Errorf("InvokeURL = %q", r.InvokeURL)
	}
	for i := range 2 {
		status, body, err := r.Invoke(t.Context(), []byte(`{"hello":"world"}`))
		if err != nil {
			t.Fatalf("invoke %d: %v", i, err)
		}
		var got struct {
			Event       map[string]string `json:"event"`
			HasDeadline bool              `json:"hasDeadline"`
			Mark        string            `json:"mark"`
		}
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
			t.Fatalf("invoke %d = %d %s (%v), want 200 with the echo", i, status, body, err)
		}
		if got.Event["hello"] != "world" || !got.HasDeadline || got.Mark != "from-env" {
			t.Errorf("invoke %d answer = %+v, want the event, a deadline and mark from-env", i, got)
		}
	}
	if n := strings.Count(r.Log(), "INIT START"); n != 1 {
		t.Errorf("log has %d INIT START lines after two invokes, want 1 (one cold start)", n)
	}
	url := r.InvokeURL
	checkStopped(t, "aws-lambda-rie", r.PID, r.Stop, strings.TrimSuffix(url, "/2015-03-31/functions/function/invocations"))
	if _, _, err := r.Invoke(t.Context(), []byte(`{}`)); err == nil {
		t.Errorf("Invoke after Stop succeeded, want an error")
	}
}

func TestInvokeSerializes(t *testing.T) {
	t.Parallel()
	root := integration(t)
	rieBin, err := LookupRIE(root)
	need(t, err)
	bootstrap, err := BuildBootstrap(t.Context(), root, "./internal/devserver/testdata/echo", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := StartRIE(t.Context(), rieBin, bootstrap, nil)
	need(t, err)
	defer r.Stop()
	// Concurrent callers would crash the emulator without Invoke's lock.
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			status, body, err := r.Invoke(t.Context(), []byte(strconv.Itoa(i)))
			if err == nil && (status != http.StatusOK || !bytes.Contains(body, []byte(`"event":`+strconv.Itoa(i)))) {
				err = errors.New("invoke " + strconv.Itoa(i) + ": " + strconv.Itoa(status) + " " + string(body))
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("%v\nlog:\n%s", err, r.Log())
		}
	}
}

// redisCall sends one inline command to the Redis server at addr and returns the first line
// of the answer.
func redisCall(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer c.Close()
	if end, ok := t.Deadline(); ok { // a server that never answers fails the test, not the machine's speed
		_ = c.SetDeadline(end.Add(-10 * time.Second))
	}
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(buf[:n])
}

func TestRedis(t *testing.T) {
	t.Parallel()
	root := integration(t)
	start := time.Now()
	s, err := StartRedis(t.Context(), root)
	need(t, err)
	t.Logf("redis ready at %s (pid %d) in %v", s.Addr, s.PID, time.Since(start))
	defer func() {
		if t.Failed() {
			t.Logf("redis log:\n%s", s.Log())
		}
	}()
	if s.Name != "redis" || !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.Endpoint != "redis://"+s.Addr {
		t.Errorf("Server = %+v, want redis on 127.0.0.1:PORT", s)
	}
	if got := redisCall(t, s.Addr, "SET devserver-check 1"); got != "+OK\r\n" {
		t.Errorf("SET = %q, want +OK", got)
	}
	// No persistence: nothing is saved, and the server listens on 127.0.0.1 only.
	if got := redisCall(t, s.Addr, "CONFIG GET save"); !strings.Contains(got, "save\r\n$0\r\n") {
		t.Errorf("CONFIG GET save = %q, want an empty value", got)
	}
	if got := redisCall(t, s.Addr, "CONFIG GET appendonly"); !strings.Contains(got, "\r\nno\r\n") {
		t.Errorf("CONFIG GET appendonly = %q, want no", got)
	}
	if got := redisCall(t, s.Addr, "CONFIG GET bind"); !strings.Contains(got, "\r\n127.0.0.1\r\n") {
		t.Errorf("CONFIG GET bind = %q, want 127.0.0.1", got)
	}
	checkStopped(t, "redis", s.PID, s.Stop, s.Addr)
}

func TestRedisNotInstalled(t *testing.T) { // not parallel: it sets PATH
	t.Setenv("PATH", t.TempDir())
	if _, err := StartRedis(t.Context(), t.TempDir()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartRedis(no redis-server on PATH) error = %v, want ErrNotInstalled", err)
	}
}
