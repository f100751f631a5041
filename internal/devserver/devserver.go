package devserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ModulePath is the module path RepoRoot looks for in go.mod.
const ModulePath = "github.com/idemgo/idem"

// StartTimeout bounds how long a Start function waits for its server to become ready.
// It is generous because moto's first start on a cold machine compiles its Python modules.
const StartTimeout = 60 * time.Second

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = 3 * time.Second

// MaxLogBytes is how much of a server's output is kept at most: older output is dropped.
const MaxLogBytes = 16 << 20

// startAttempts is how many times a server is started on a fresh port when it exits before
// becoming ready (another process may take the port between FreePort and the server's bind).
const startAttempts = 3

// ErrNotInstalled reports that a server's installation is missing; run `make deps`.
// Checked with errors.Is.
var ErrNotInstalled = errors.New("devserver: not installed (run make deps)")

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago: it listens on
// 127.0.0.1:0, closes the listener and returns the port the kernel chose. Another process
// may take the port before the caller binds it; the Start functions check that the
// listening socket belongs to their server (from /proc) and retry on a new port when their
// server exits before becoming ready.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct free ports, holding all listeners open until every port is
// chosen so that the kernel cannot hand out the same port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close() // held only to reserve the port while the others are chosen
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("devserver: free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// RepoRoot returns the directory of idem's go.mod: it walks up from the working directory
// to the first directory whose go.mod declares module ModulePath.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("devserver: repo root: %w", err)
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("devserver: no go.mod for module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// modulePathOf returns the module path declared in the go.mod file at path, or "".
func modulePathOf(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// LookupRIE returns the path of the aws-lambda-rie binary: $IDEM_RIE when set, otherwise
// <root>/.cache/bin/aws-lambda-rie. The error wraps ErrNotInstalled when the file is missing.
func LookupRIE(root string) (string, error) {
	path := os.Getenv("IDEM_RIE")
	if path == "" {
		path = filepath.Join(root, ".cache", "bin", "aws-lambda-rie")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("aws-lambda-rie at %s: %w", path, ErrNotInstalled)
	}
	return path, nil
}

// Server is a running server started by StartDynalite, StartMoto or StartRedis.
// Its fields are set once by the Start function and must not be changed; its methods are
// safe for concurrent use.
type Server struct {
	// Name is "dynalite", "moto" or "redis".
	Name string
	// Endpoint is the server's base URL: "http://127.0.0.1:PORT" for the DynamoDB-API
	// servers (for AWS_ENDPOINT_URL_DYNAMODB), "redis://127.0.0.1:PORT" for Redis.
	Endpoint string
	// Addr is the server's "127.0.0.1:PORT" (for IDEM_REDIS_ADDR).
	Addr string
	// PID is the server's process ID, which is also its process group ID.
	PID int

	proc *process
}

// Stop stops the server: SIGTERM to its process group, then SIGKILL after StopGrace.
// It waits for the process to exit. It is idempotent: later calls return the first call's
// result. The error is nil when the server was running until Stop; it reports how the
// server ended when it had exited on its own before.
func (s *Server) Stop() error { return s.proc.stop() }

// Log returns the server's combined stdout and stderr so far (at most MaxLogBytes of the most recent).
func (s *Server) Log() string { return s.proc.log.String() }

// StartDynalite starts dynalite from <root>/node_modules on a free port of 127.0.0.1, with
// tables created, updated and deleted at once, and waits until GET / answers.
// The server runs until Stop is called or ctx is done, whichever comes first: pass a
// context that lives as long as the server should (t.Context() in a test), not a start-up
// timeout. The error wraps ErrNotInstalled when node_modules has no dynalite.
func StartDynalite(ctx context.Context, root string) (*Server, error) {
	cli := filepath.Join(root, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("dynalite at %s: %w", cli, ErrNotInstalled)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("devserver: dynalite needs node on PATH: %w", err)
	}
	return startServer(ctx, "dynalite", "http", root, httpReady("/"), func(port int) []string {
		return []string{node, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}
	})
}

// StartMoto starts moto's server from <root>/.cache/venv on a free port of 127.0.0.1 and
// waits until GET /moto-api/ answers. The first DynamoDB request after start takes about
// 0.3 s more than later ones (moto loads its backend lazily).
// The server runs until Stop is called or ctx is done, whichever comes first.
// The error wraps ErrNotInstalled when the virtualenv has no moto_server.
func StartMoto(ctx context.Context, root string) (*Server, error) {
	bin := filepath.Join(root, ".cache", "venv", "bin", "moto_server")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("moto at %s: %w", bin, ErrNotInstalled)
	}
	return startServer(ctx, "moto", "http", root, httpReady("/moto-api/"), func(port int) []string {
		return []string{bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
}

// StartRedis starts redis-server (from PATH) on a free port of 127.0.0.1 without
// persistence (an empty --save and --appendonly no), in root, and waits until it answers
// PING. extra arguments follow the standard ones (for example "--replicaof", "127.0.0.1
// 6379", or "--cluster-enabled", "yes"); servers that write files (a replica's copy of the
// data, a cluster node's configuration) should be given "--dir" with a temporary directory.
// The server runs until Stop is called or ctx is done, whichever comes first.
// The error wraps ErrNotInstalled when redis-server is not on PATH.
func StartRedis(ctx context.Context, root string, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", ErrNotInstalled)
	}
	return startServer(ctx, "redis", "redis", root, redisPing, func(port int) []string {
		return append([]string{bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no"}, extra...)
	})
}

// startServer starts argv(port) on a free port, retrying on a new port when the process
// exits before ready answers true for its address.
func startServer(ctx context.Context, name, scheme, dir string, ready func(ctx context.Context, addr string) bool, argv func(port int) []string) (*Server, error) {
	var lastErr error
	for range startAttempts {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := startProcess(ctx, name, argv(port), nil, dir)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, port, func(ctx context.Context) bool { return ready(ctx, addr) })
		if err == nil {
			return &Server{Name: name, Endpoint: scheme + "://" + addr, Addr: addr, PID: p.pid, proc: p}, nil
		}
		_ = p.stop() // err, kept below, says why it did not start
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, lastErr
}

// httpReady returns a readiness check: GET http://addr+path answers 200.
func httpReady(path string) func(ctx context.Context, addr string) bool {
	return func(ctx context.Context, addr string) bool { return httpOK(ctx, "http://"+addr+path) }
}

// redisPing reports whether the Redis server at addr answers PING with +PONG.
func redisPing(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// noProxy is a transport that never uses a proxy: every request here goes to 127.0.0.1.
func noProxy() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

var pollClient = &http.Client{Transport: noProxy(), Timeout: 2 * time.Second}

// httpOK reports whether GET url answers 200.
func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := pollClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// tcpOpen reports whether addr accepts a TCP connection.
func tcpOpen(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// RIE is a running AWS Lambda Runtime Interface Emulator serving one bootstrap binary.
// Its fields are set once by StartRIE and must not be changed; its methods are safe for
// concurrent use.
//
// The classic emulator crashes on overlapping invokes, so Invoke serializes the invokes
// made through it; a caller that posts to InvokeURL itself must do the same. To deliver two
// events at the same time, start two RIE instances (as Lambda uses two sandboxes).
type RIE struct {
	// InvokeURL is "http://127.0.0.1:PORT/2015-03-31/functions/function/invocations".
	InvokeURL string
	// RuntimeAPIAddr is the "127.0.0.1:PORT" address of the Runtime API the bootstrap polls.
	RuntimeAPIAddr string
	// PID is the emulator's process ID, which is also its process group ID (the bootstrap
	// runs in the same group).
	PID int

	proc   *process
	client *http.Client
	mu     sync.Mutex // serializes Invoke
}

// StartRIE starts rieBin serving the bootstrap executable at path bootstrap, with the invoke
// and Runtime API addresses on free ports of 127.0.0.1, and waits until the invoke port
// accepts connections. The emulator, and so the function, gets this process's environment
// plus env ("KEY=value" entries, which win over inherited ones): use it for
// AWS_LAMBDA_FUNCTION_TIMEOUT (whole seconds, default 300), AWS_LAMBDA_FUNCTION_NAME, table
// names and AWS_ENDPOINT_URL_DYNAMODB. The function starts at the first invoke ("INIT START"
// in Log). The emulator runs until Stop is called or ctx is done, whichever comes first.
func StartRIE(ctx context.Context, rieBin, bootstrap string, env []string) (*RIE, error) {
	if _, err := os.Stat(rieBin); err != nil {
		return nil, fmt.Errorf("aws-lambda-rie at %s: %w", rieBin, ErrNotInstalled)
	}
	abs, err := filepath.Abs(bootstrap)
	if err != nil {
		return nil, fmt.Errorf("devserver: bootstrap: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("devserver: bootstrap %s is not an executable file", abs)
	}
	fullEnv := append(os.Environ(), env...)
	var lastErr error
	for range startAttempts {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		invokeAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
		apiAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
		argv := []string{rieBin,
			"--runtime-interface-emulator-address", invokeAddr,
			"--runtime-api-address", apiAddr,
			abs}
		p, err := startProcess(ctx, "aws-lambda-rie", argv, fullEnv, filepath.Dir(abs))
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, ports[0], func(ctx context.Context) bool { return tcpOpen(ctx, invokeAddr) })
		if err == nil {
			return &RIE{
				InvokeURL:      "http://" + invokeAddr + "/2015-03-31/functions/function/invocations",
				RuntimeAPIAddr: apiAddr,
				PID:            p.pid,
				proc:           p,
				client:         &http.Client{Transport: noProxy()},
			}, nil
		}
		_ = p.stop() // err, kept below, says why it did not start
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, lastErr
}

// Invoke posts event to the function and returns the HTTP status and body of the answer.
// Invokes on one RIE are serialized: a call waits for the one before it to finish.
// A function error is not an error here: a returned error is status 200 with an
// errorType/errorMessage JSON body, a timeout is status 200 with the text
// "Task timed out after N.00 seconds", a crash (panic, os.Exit) is status 502.
// ctx bounds the wait for the answer.
func (r *RIE) Invoke(ctx context.Context, event []byte) (status int, body []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.InvokeURL, bytes.NewReader(event))
	if err != nil {
		return 0, nil, fmt.Errorf("devserver: invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("devserver: invoke: %w", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, buf.Bytes(), fmt.Errorf("devserver: invoke: reading answer: %w", err)
	}
	return resp.StatusCode, buf.Bytes(), nil
}

// Log returns the emulator's and the function's combined output so far (at most
// MaxLogBytes of the most recent): the emulator's "INIT START", "START RequestId", "END", "REPORT" lines and
// whatever the function writes.
func (r *RIE) Log() string { return r.proc.log.String() }

// Stop stops the emulator and the function: SIGTERM to their process group, then SIGKILL
// after StopGrace. It is idempotent: later calls return the first call's result.
func (r *RIE) Stop() error { return r.proc.stop() }

// BuildBootstrap builds the Go main package pkg (an import path, or a path relative to root
// such as "./internal/devserver/testdata/echo") as a Lambda bootstrap: a static binary named
// "bootstrap" in outDir, built with CGO_ENABLED=0 and -tags lambda.norpc. It returns the
// binary's absolute path.
func BuildBootstrap(ctx context.Context, root, pkg, outDir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("devserver: build bootstrap: %w", err)
	}
	out, err := filepath.Abs(filepath.Join(outDir, "bootstrap"))
	if err != nil {
		return "", fmt.Errorf("devserver: build bootstrap: %w", err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("devserver: go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}
