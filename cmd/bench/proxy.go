package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgo/idem/internal/capacity"
)

// The counting proxy runs in a child process (this binary re-executed with
// -proxy-child), so that its CPU time is not counted as the client's.

const countsPath = "/__bench/counts"

// runProxyChild serves a reverse proxy to upstream on 127.0.0.1, counting
// requests by their X-Amz-Target header and charging the DynamoDB ones
// (charge.go; trust: the server's reported units are the figures), and
// prints "LISTEN <addr>" on stdout. It exits when stdin reaches EOF (the
// parent died or closed it) or on SIGTERM.
func runProxyChild(upstream string, trust bool) int {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		fmt.Fprintf(os.Stderr, "proxy: upstream %q must be http://127.0.0.1:PORT\n", upstream)
		return 2
	}
	var mu sync.Mutex
	counts := map[string]int64{}
	rp := httputil.NewSingleHostReverseProxy(u)
	transport := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	rp.Transport = transport
	ch := &charger{upstream: strings.TrimRight(upstream, "/"), client: &http.Client{Transport: transport},
		ledger: capacity.NewLedger(), trust: trust, totals: capacity.Totals{}}
	// A failed forward answers 502, which the SDK reports; the log line
	// would only repeat it (it happens when dynalite stops first on Ctrl-C).
	rp.ErrorLog = log.New(io.Discard, "", 0)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == countsPath && r.Method == http.MethodGet {
			mu.Lock()
			snap := maps.Clone(counts)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(snap)
			return
		}
		if r.URL.Path == capacityPath && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(ch.report())
			return
		}
		target := r.Header.Get("X-Amz-Target")
		if target == "" {
			target = "(none)"
		}
		mu.Lock()
		counts[target]++
		mu.Unlock()
		if op := target[strings.LastIndexByte(target, '.')+1:]; strings.HasPrefix(target, "DynamoDB_") && charged(op) {
			ch.serve(w, r, op)
			return
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		return 1
	}
	return 0
}

// proxy is the parent's handle on the counting proxy child.
type proxy struct {
	Endpoint string // http://127.0.0.1:PORT
	PID      int

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	once  sync.Once
	http  *http.Client
}

// startProxy re-executes this binary as the counting proxy in front of
// upstream and waits for its address. trust says whether the server's
// reported capacity units are the figures (dynalite's are; moto's are
// constants).
func startProxy(ctx context.Context, upstream string, trust bool) (*proxy, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	mode := "computed"
	if trust {
		mode = "reported"
	}
	cmd := exec.Command(self, "-proxy-child", upstream, mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("proxy: start: %w", err)
	}
	p := &proxy{PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, done: make(chan struct{}),
		http: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}}
	go func() { _ = cmd.Wait(); close(p.done) }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "LISTEN ")
		if !ok {
			p.Stop()
			return nil, fmt.Errorf("proxy: unexpected first line %q", s)
		}
		p.Endpoint = "http://" + addr
		return p, nil
	case <-time.After(10 * time.Second):
		p.Stop()
		return nil, errors.New("proxy: not ready after 10 s")
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
}

// Stop ends the proxy by its PID: SIGTERM (and closing its stdin), then
// SIGKILL after 3 s. Idempotent.
func (p *proxy) Stop() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Counts returns the proxy's request counts so far, by operation name
// (X-Amz-Target without its "DynamoDB_20120810." prefix).
func (p *proxy) Counts(ctx context.Context) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+countsPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("proxy counts: %w", err)
	}
	defer resp.Body.Close()
	var raw map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return nil, fmt.Errorf("proxy counts: %w", err)
	}
	out := make(map[string]int64, len(raw))
	for k, v := range raw {
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			k = k[i+1:]
		}
		out[k] += v
	}
	return out, nil
}

// Capacity returns the proxy's capacity tallies so far, by operation.
func (p *proxy) Capacity(ctx context.Context) (capacityReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+capacityPath, nil)
	if err != nil {
		return capacityReport{}, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return capacityReport{}, fmt.Errorf("proxy capacity: %w", err)
	}
	defer resp.Body.Close()
	var rep capacityReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return capacityReport{}, fmt.Errorf("proxy capacity: %w", err)
	}
	return rep, nil
}

// diffCounts returns after - before, without zero entries.
func diffCounts(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if x := v - before[k]; x != 0 {
			d[k] = x
		}
	}
	return d
}
