package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
)

// The tests run the commands in-process (cli.run) against the DynamoDB API
// at the endpoint the SDK's configuration names (AWS_ENDPOINT_URL_DYNAMODB),
// which internal/cmd/testenv sets after starting dynalite:
//
//	go run ./internal/cmd/testenv -server dynalite -- go test ./cmd/idem/...

// t0 is the fixed time the tests' records are written at.
var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

const fp = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

// integration fails the test when no DynamoDB endpoint is configured, unless
// IDEM_SKIP_INTEGRATION=1 says to skip it.
func integration(t *testing.T) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run `go run ./internal/cmd/testenv -server dynalite -- go test ./cmd/idem/...`, " +
			"or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
}

// fixture is a table of the test's own, and a store on it.
type fixture struct {
	client *dynamodb.Client
	table  string
	store  *ddbstore.Store
}

func newFixture(t *testing.T, opts ...ddbstore.Option) *fixture {
	t.Helper()
	integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: dynamodb.NewFromConfig(cfg), table: tableName()}
	if _, err := ddbstore.CreateTable(ctx, f.client, f.table, opts...); err != nil {
		t.Fatalf("CreateTable(%s) = %v", f.table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = f.client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
	})
	if f.store, err = ddbstore.New(f.client, f.table, opts...); err != nil {
		t.Fatal(err)
	}
	return f
}

func tableName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "idem-cli-" + hex.EncodeToString(b[:])
}

// spec describes a record to write: reserved at t0+at with a lease of
// lease, then completed at t0+done (unless status is in progress).
type spec struct {
	status    core.Status
	retryable bool
	errText   string
	result    []byte
	at, lease time.Duration
	done      time.Duration
	retention time.Duration
	token     string
}

// put writes the record of key as s describes and returns it as stored.
func (f *fixture) put(t *testing.T, key string, s spec) core.Record {
	t.Helper()
	ctx := context.Background()
	if s.lease == 0 {
		s.lease = 5 * time.Minute
	}
	if s.retention == 0 {
		s.retention = 24 * time.Hour
	}
	if s.token == "" {
		s.token = "tok-" + strings.ReplaceAll(key, ":", "-")
	}
	now := t0.Add(s.at)
	rec := core.Reserve(key, fp, s.token, nil, now, now.Add(s.lease), s.retention)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatalf("Reserve(%s) = %v", key, err)
	}
	switch s.status {
	case core.StatusInProgress:
		stored, err := f.store.Get(ctx, key, now)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	case core.StatusSucceeded:
		rec = core.Succeed(rec, s.result, t0.Add(s.done), s.retention)
	default:
		rec = core.Fail(rec, errors.New(s.errText), s.retryable, t0.Add(s.done), s.retention)
	}
	stored, err := f.store.Complete(ctx, rec)
	if err != nil {
		t.Fatalf("Complete(%s) = %v", key, err)
	}
	return stored
}

type result struct {
	code           int
	stdout, stderr string
}

// cmd runs the command line args with the clock at now and stdin, and
// checks that no --key value given verbatim appears in its output.
func cmd(t *testing.T, now time.Time, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	// The clock stands still: a rate limit's pauses pass at once.
	c := &cli{stdin: stdin, stdout: &out, stderr: &errOut, now: func() time.Time { return now }, sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	r := result{code: c.run(context.Background(), args), stdout: out.String(), stderr: errOut.String()}
	for i, a := range args {
		// A derived key is a hash, shown as the logs show it; a key given
		// verbatim never is.
		if a == "--key" && i+1 < len(args) && !core.IsDerivedKey(args[i+1]) && (strings.Contains(r.stdout, args[i+1]) || strings.Contains(r.stderr, args[i+1])) {
			t.Errorf("idem %s printed the raw key %q:\n%s%s", args[0], args[i+1], r.stdout, r.stderr)
		}
	}
	return r
}

// mustCmd is cmd expecting exit code want.
func mustCmd(t *testing.T, want int, now time.Time, stdin io.Reader, args ...string) result {
	t.Helper()
	r := cmd(t, now, stdin, args...)
	if r.code != want {
		t.Fatalf("idem %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUsage(t *testing.T) {
	t.Setenv("IDEM_TABLE", "")
	events := writeFile(t, "event.json", `{"Records":[{"messageId":"m-1","body":"{}"},{"messageId":"m-2","body":"{}"}]}`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage: idem COMMAND"},
		{"unknown command", []string{"delete"}, `unknown command "delete"`},
		{"no table", []string{"list"}, "no table: pass --table or set IDEM_TABLE"},
		{"unknown flag", []string{"list", "--table", "t1x", "--colour"}, "flag provided but not defined: -colour"},
		{"positional argument", []string{"list", "--table", "t1x", "extra"}, `unexpected argument "extra"`},
		{"no key", []string{"inspect", "--table", "t1x"}, "exactly one of --key, --sqs-event or --http-event"},
		{"two keys", []string{"inspect", "--table", "t1x", "--key", "evt:abc:def", "--http-event", "x"}, "exactly one of"},
		{"invalid key", []string{"inspect", "--table", "t1x", "--key", "short"}, "--key: idem: invalid idempotency key: length 5"},
		{"sqs without source", []string{"inspect", "--table", "t1x", "--sqs-event", events}, "needs --key-source and --action"},
		{"bad key source", []string{"inspect", "--table", "t1x", "--sqs-event", events, "--key-source", "header:x", "--action", "a"}, `key source "header:x" is an HTTP wrapper's, not a message's`},
		{"several messages", []string{"inspect", "--table", "t1x", "--sqs-event", events, "--key-source", "message-id", "--action", "a"}, "has 2 messages: choose one with --message 0..1"},
		{"message out of range", []string{"inspect", "--table", "t1x", "--sqs-event", events, "--key-source", "message-id", "--action", "a", "--message", "2"}, "--message 2"},
		{"no usable key", []string{"inspect", "--table", "t1x", "--sqs-event", events, "--key-source", "body:event_id", "--action", "a", "--message", "0"}, `message 0 has no usable key (the wrapper stores no record for it)`},
		{"missing event file", []string{"inspect", "--table", "t1x", "--http-event", "/nonexistent.json", "--kind", "rest"}, "no such file"},
		{"http without kind", []string{"inspect", "--table", "t1x", "--http-event", events}, "needs --kind rest, httpapi, url or alb"},
		{"bad state", []string{"list", "--table", "t1x", "--status", "done"}, `--status "done": want one of in_progress, stuck, failed,`},
		{"bad limit", []string{"list", "--table", "t1x", "--limit", "0"}, "--limit 0"},
		{"bad max-rcu", []string{"stats", "--table", "t1x", "--max-rcu", "-1"}, "--max-rcu -1"},
		{"bad fence", []string{"release", "--table", "t1x", "--key", "evt:abc:def", "--fence", "done/x"}, `--fence "done/x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := cmd(t, t0, nil, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "release       delete a key's record (fenced)") {
		t.Errorf("idem help: exit %d, stdout:\n%s", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"release", "-h"}, &out, &errOut); code != exitOK || !strings.Contains(errOut.String(), "-fence") {
		t.Errorf("idem release -h: exit %d, stderr:\n%s", code, errOut.String())
	}
}

// isolateAWS points the SDK's configuration at nothing: no files, no
// instance metadata, no environment credentials.
func isolateAWS(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, v := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(v, "")
	}
}

// awsError serves every request with a DynamoDB error of code and status.
func awsError(t *testing.T, status int, code string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"injected"}`, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestConfigurationErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no region", map[string]string{"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret"},
			nil, exitConfig, "no AWS region: pass --region"},
		{"no credentials", map[string]string{"AWS_REGION": "us-east-1"},
			nil, exitConfig, "no AWS credentials"},
		{"missing profile", map[string]string{"AWS_REGION": "us-east-1"},
			[]string{"--profile", "nonexistent"}, exitConfig, "cannot load the AWS configuration"},
		{"access denied", map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret"},
			[]string{"--endpoint-url", awsError(t, 400, "AccessDeniedException")}, exitDenied, `access denied to table "orders-idem"`},
		{"unrecognized client", map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret"},
			[]string{"--endpoint-url", awsError(t, 400, "UnrecognizedClientException")}, exitDenied, "access denied"},
		{"throttled", map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_MAX_ATTEMPTS": "1"},
			[]string{"--endpoint-url", awsError(t, 400, "ProvisionedThroughputExceededException")}, exitUnavailable, "DynamoDB throttled"},
		{"unavailable", map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_MAX_ATTEMPTS": "1"},
			[]string{"--endpoint-url", awsError(t, 500, "InternalServerError")}, exitUnavailable, "DynamoDB is unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			isolateAWS(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"stats", "--table", "orders-idem"}, tc.args...)
			r := cmd(t, t0, nil, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	store := func(sentinel error) error {
		return core.MarkPermanent(&ddbstore.Error{Op: "get", Table: "t1", Err: fmt.Errorf("%w: cause", sentinel)})
	}
	tests := []struct {
		name string
		err  error
		code int
	}{
		{"usage", usageErrorf("bad"), exitUsage},
		{"config", &configError{msg: "no region"}, exitConfig},
		{"not released", &notReleasedError{"no"}, exitNotReleased},
		{"interrupted", fmt.Errorf("scan: %w", context.Canceled), exitInterrupted},
		{"no record", &noRecordError{keyHash: "h", table: "t1"}, exitNotFound},
		{"changed", fmt.Errorf("x: %w", idem.ErrRecordChanged), exitChanged},
		{"no table", store(ddbstore.ErrTableNotFound), exitNoTable},
		{"schema", store(ddbstore.ErrSchemaMismatch), exitSchema},
		{"denied", store(ddbstore.ErrAccessDenied), exitDenied},
		{"throttled", core.MarkTransient(store(ddbstore.ErrThrottled)), exitUnavailable},
		{"unavailable", store(ddbstore.ErrUnavailable), exitUnavailable},
		{"bad token", store(ddbstore.ErrBadToken), exitUsage},
		{"unknown host", store(&smithy.OperationError{ServiceID: "DynamoDB", OperationName: "Scan", Err: &net.DNSError{Name: "dynamodb.example.invalid", IsNotFound: true}}), exitConfig},
		{"refused", &smithy.OperationError{ServiceID: "SQS", OperationName: "ReceiveMessage", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, exitConfig},
		{"other", errors.New("boom"), exitError},
	}
	for _, tc := range tests {
		if code, msg := explain(tc.err); code != tc.code || msg == "" {
			t.Errorf("%s: explain(%v) = %d %q, want %d", tc.name, tc.err, code, msg, tc.code)
		}
	}
	for err, want := range map[error]string{
		tests[len(tests)-3].err: "cannot reach DynamoDB at dynamodb.example.invalid (unknown host): check the endpoint (--endpoint-url, AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL)",
		tests[len(tests)-2].err: "cannot reach SQS at the endpoint (connection refused): check the endpoint (--endpoint-url, AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL)",
	} {
		if _, msg := explain(err); !strings.HasPrefix(msg, want) {
			t.Errorf("explain(%v) = %q, want %q...", err, msg, want)
		}
	}
}

// TestProgress drives the progress line with a fake clock: nothing during
// the first second, then on a terminal a line rewritten at every page, and
// elsewhere a line at most every five seconds; nothing when off (--json).
func TestProgress(t *testing.T) {
	t.Parallel()
	type step struct {
		at   time.Duration // since the scan started
		want string        // written by this update
	}
	tests := []struct {
		name  string
		tty   bool
		on    bool
		steps []step
		clear string // written by clear
	}{
		{name: "terminal", tty: true, on: true, steps: []step{
			{900 * time.Millisecond, ""},
			{time.Second, "\r\033[Kscanning: 1200 items, 15.5 RCU, 3 matching, 1s"},
			{1200 * time.Millisecond, "\r\033[Kscanning: 1200 items, 15.5 RCU, 3 matching, 1s"},
		}, clear: "\r\033[K"},
		{name: "not a terminal", on: true, steps: []step{
			{500 * time.Millisecond, ""},
			{1500 * time.Millisecond, "idem: scanning: 1200 items, 15.5 RCU, 3 matching, 2s\n"},
			{6 * time.Second, ""},
			{6500 * time.Millisecond, "idem: scanning: 1200 items, 15.5 RCU, 3 matching, 7s\n"},
		}},
		{name: "off", tty: true, steps: []step{{time.Minute, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(t0)
			var buf bytes.Buffer
			p := newProgress(&buf, clock.Now, tc.on)
			p.tty = tc.tty
			for i, s := range tc.steps {
				clock.Advance(s.at - clock.Now().Sub(t0))
				buf.Reset()
				p.update(1200, 15.5, 3)
				if buf.String() != s.want {
					t.Errorf("step %d (%v): wrote %q, want %q", i, s.at, buf.String(), s.want)
				}
			}
			buf.Reset()
			p.clear()
			if buf.String() != tc.clear {
				t.Errorf("clear wrote %q, want %q", buf.String(), tc.clear)
			}
		})
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{&bytes.Buffer{}, f} {
		if isTerminal(w) {
			t.Errorf("%T taken for a terminal", w)
		}
	}
}
