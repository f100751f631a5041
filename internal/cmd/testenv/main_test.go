package main

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/devserver"
)

func TestWithEnv(t *testing.T) {
	t.Parallel()
	got := withEnv(
		[]string{"PATH=/bin", "AWS_REGION=eu-west-1", "HOME=/root", "AWS_REGION_X=keep"},
		map[string]string{"AWS_REGION": "us-east-1", "IDEM_DDB_SERVER": "moto"})
	slices.Sort(got)
	want := []string{"AWS_REGION=us-east-1", "AWS_REGION_X=keep", "HOME=/root", "IDEM_DDB_SERVER=moto", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv = %q, want %q", got, want)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "shorter", in: "a\nb\n", n: 3, want: "a\nb"},
		{name: "longer", in: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		{name: "empty", in: "", n: 2, want: ""},
	}
	for _, tt := range tests {
		if got := tail(tt.in, tt.n); got != tt.want {
			t.Errorf("%s: tail(%q, %d) = %q, want %q", tt.name, tt.in, tt.n, got, tt.want)
		}
	}
}

// TestRun builds testenv and runs a shell under it: the command sees the contract's
// variables, the caller's other variables, and testenv exits with the command's code.
func TestRun(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "dynalite")); err != nil {
		t.Fatalf("dynalite is not installed: run `make deps` first (or set IDEM_SKIP_INTEGRATION=1)")
	}
	bin := filepath.Join(t.TempDir(), "testenv")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	script := `echo "$AWS_ENDPOINT_URL_DYNAMODB|$AWS_REGION|$AWS_ACCESS_KEY_ID|$AWS_SECRET_ACCESS_KEY|$IDEM_DDB_SERVER|$KEEP_ME"; exit 7`
	cmd := exec.CommandContext(t.Context(), bin, "-server", "dynalite", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "KEEP_ME=kept", "AWS_REGION=eu-west-3")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("testenv exit code = %d (%v), want 7\nstderr:\n%s", code, err, stderr.String())
	}
	f := strings.Split(strings.TrimSpace(stdout.String()), "|")
	if len(f) != 6 || !strings.HasPrefix(f[0], "http://127.0.0.1:") ||
		!slices.Equal(f[1:], []string{"us-east-1", "test", "test", "dynalite", "kept"}) {
		t.Errorf("command saw %q, want endpoint|us-east-1|test|test|dynalite|kept", stdout.String())
	}
	// The server was stopped: its port no longer accepts connections.
	if addr, ok := strings.CutPrefix(f[0], "http://"); ok {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("server at %s still accepts connections after testenv exited", addr)
		}
	}
	if !strings.Contains(stderr.String(), "exited with 7") {
		t.Errorf("stderr = %q, want a note that the command exited with 7", stderr.String())
	}
}

func TestServerEnv(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dynalite := &devserver.Server{Name: "dynalite", Endpoint: "http://127.0.0.1:1", Addr: "127.0.0.1:1"}
	moto := &devserver.Server{Name: "moto", Endpoint: "http://127.0.0.1:3", Addr: "127.0.0.1:3"}
	redis := &devserver.Server{Name: "redis", Endpoint: "redis://127.0.0.1:2", Addr: "127.0.0.1:2"}
	aws := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	const s3 = "AWS_ENDPOINT_URL_S3"
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name            string
		ddb, sqs, redis *devserver.Server
		want            map[string]string
	}{
		{name: "dynalite and redis", ddb: dynalite, redis: redis, want: with(aws,
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1", "IDEM_DDB_SERVER", "dynalite", "IDEM_DDB_NO_TRANSACTIONS", "1", "IDEM_REDIS_ADDR", "127.0.0.1:2")},
		{name: "dynalite and moto's SQS", ddb: dynalite, sqs: moto, want: with(aws,
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1", "IDEM_DDB_SERVER", "dynalite", "IDEM_DDB_NO_TRANSACTIONS", "1",
			"AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:3", "IDEM_SQS_SERVER", "moto", s3, "http://127.0.0.1:3", "IDEM_S3_SERVER", "moto")},
		{name: "moto for both", ddb: moto, sqs: moto, want: with(aws,
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:3", "IDEM_DDB_SERVER", "moto",
			"AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:3", "IDEM_SQS_SERVER", "moto", s3, "http://127.0.0.1:3", "IDEM_S3_SERVER", "moto")},
		{name: "moto for DynamoDB", ddb: moto, want: with(aws,
			"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:3", "IDEM_DDB_SERVER", "moto", s3, "http://127.0.0.1:3", "IDEM_S3_SERVER", "moto")},
		{name: "SQS only", sqs: moto, want: with(aws, "AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:3", "IDEM_SQS_SERVER", "moto",
			s3, "http://127.0.0.1:3", "IDEM_S3_SERVER", "moto")},
		{name: "redis only", redis: redis, want: map[string]string{"IDEM_REDIS_ADDR": "127.0.0.1:2"}},
	}
	for _, tt := range tests {
		if got := serverEnv(root, tt.ddb, tt.sqs, tt.redis); !maps.Equal(got, tt.want) {
			t.Errorf("%s: serverEnv = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// planServers starts one moto server for both APIs, a second server only when SQS is not
// the DynamoDB-API server, and refuses unknown servers.
func TestPlanServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, server, sqs string
		redis             bool
		want              []roles
		wantErr           bool
	}{
		{name: "dynalite", server: "dynalite", sqs: "none", want: []roles{{ddb: true}}},
		{name: "dynalite, moto's SQS, redis", server: "dynalite", sqs: "moto", redis: true,
			want: []roles{{ddb: true}, {sqs: true}, {redis: true}}},
		{name: "moto for both", server: "moto", sqs: "moto", want: []roles{{ddb: true, sqs: true}}},
		{name: "SQS only", server: "none", sqs: "moto", want: []roles{{sqs: true}}},
		{name: "unknown SQS server", server: "dynalite", sqs: "localstack", wantErr: true},
		{name: "unknown server", server: "dynamodb-local", sqs: "none", wantErr: true},
	}
	for _, tt := range tests {
		plan, err := planServers(tt.server, tt.sqs, tt.redis)
		if tt.wantErr {
			if err == nil {
				t.Errorf("%s: planServers accepted it", tt.name)
			}
			continue
		}
		var got []roles
		for _, p := range plan {
			got = append(got, *p.roles)
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: planServers = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

// TestRunSQS runs a command under testenv -server dynalite -sqs moto: it sees both
// endpoints, on two servers, and both are stopped afterwards.
func TestRunSQS(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"node_modules/dynalite", ".cache/venv/bin/moto_server"} {
		if _, err := os.Stat(filepath.Join(root, dep)); err != nil {
			t.Fatalf("%s is not installed: run `make deps` first (or set IDEM_SKIP_INTEGRATION=1)", dep)
		}
	}
	bin := filepath.Join(t.TempDir(), "testenv")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := `echo "$AWS_ENDPOINT_URL_DYNAMODB|$AWS_ENDPOINT_URL_SQS|$IDEM_SQS_SERVER"`
	cmd := exec.CommandContext(t.Context(), bin, "-server", "dynalite", "-sqs", "moto", "--", "sh", "-c", script)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: %v\nstderr:\n%s", err, stderr.String())
	}
	f := strings.Split(strings.TrimSpace(stdout.String()), "|")
	if len(f) != 3 || !strings.HasPrefix(f[0], "http://127.0.0.1:") || !strings.HasPrefix(f[1], "http://127.0.0.1:") ||
		f[0] == f[1] || f[2] != "moto" {
		t.Fatalf("command saw %q, want two endpoints and moto", stdout.String())
	}
	for _, endpoint := range f[:2] {
		addr := strings.TrimPrefix(endpoint, "http://")
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("server at %s still accepts connections after testenv exited", addr)
		}
	}
}

// TestRunRedis runs a command under testenv -server none -redis: it sees IDEM_REDIS_ADDR and
// no DynamoDB endpoint, and Redis is stopped afterwards.
func TestRunRedis(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed: run `make deps` first (or set IDEM_SKIP_INTEGRATION=1)")
	}
	bin := filepath.Join(t.TempDir(), "testenv")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := `echo "$IDEM_REDIS_ADDR|$AWS_ENDPOINT_URL_DYNAMODB"`
	cmd := exec.CommandContext(t.Context(), bin, "-server", "none", "-redis", "--", "sh", "-c", script)
	cmd.Env = withEnv(os.Environ(), map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "", "IDEM_REDIS_ADDR": ""})
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("testenv: %v\nstderr:\n%s", err, stderr.String())
	}
	addr, ddb, _ := strings.Cut(strings.TrimSpace(stdout.String()), "|")
	if !strings.HasPrefix(addr, "127.0.0.1:") || ddb != "" {
		t.Fatalf("command saw %q, want 127.0.0.1:PORT| (no DynamoDB endpoint)", stdout.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("redis at %s still accepts connections after testenv exited", addr)
	}
}
