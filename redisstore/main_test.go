package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/internal/devserver"
)

// The tests run against the Redis server at IDEM_REDIS_ADDR (testenv -redis
// sets it); without it, TestMain starts one with internal/devserver and
// stops it afterwards. Tests that stop or reconfigure a server start their
// own. With IDEM_SKIP_INTEGRATION=1 the tests that need a server skip, and so
// do the examples (which cannot skip themselves).
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	redis.SetLogger(quiet{}) // the tests break connections on purpose
	if skipIntegration() {
		skip := "^Example"
		if prev := flag.Lookup("test.skip").Value.String(); prev != "" {
			skip = prev + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
		return m.Run()
	}
	if os.Getenv("IDEM_REDIS_ADDR") == "" {
		root, err := devserver.RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		srv, err := devserver.StartRedis(context.Background(), root)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%v\nrun `make deps` (or set IDEM_REDIS_ADDR, or IDEM_SKIP_INTEGRATION=1)\n", err)
			return 1
		}
		defer srv.Stop()
		if err := os.Setenv("IDEM_REDIS_ADDR", srv.Addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// quiet discards go-redis's log.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func skipIntegration() bool { return os.Getenv("IDEM_SKIP_INTEGRATION") == "1" }

// integration skips t when IDEM_SKIP_INTEGRATION=1.
func integration(t testing.TB) {
	t.Helper()
	if skipIntegration() {
		t.Skip("IDEM_SKIP_INTEGRATION=1: Redis integration test skipped")
	}
}

// startRedis starts a server of t's own (stopped when t ends), in a
// temporary directory.
func startRedis(t testing.TB, extra ...string) *devserver.Server {
	t.Helper()
	integration(t)
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := devserver.StartRedis(context.Background(), root, append([]string{"--dir", t.TempDir()}, extra...)...)
	if err != nil {
		t.Fatalf("%v: run `make deps` first (or set IDEM_SKIP_INTEGRATION=1)", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil && !strings.Contains(err.Error(), "had exited") {
			t.Errorf("stop redis: %v", err)
		}
	})
	return srv
}

// counter counts the commands a client sends, by name and, for scripts, by
// which script ("evalsha reserve"), other than those that set a new
// connection up (HELLO, CLIENT). Safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *counter) add(cmd redis.Cmder) {
	name := strings.ToLower(cmd.Name())
	if name == "hello" || name == "client" {
		return
	}
	if args := cmd.Args(); (name == "evalsha" || name == "eval") && len(args) > 1 {
		name += " " + scriptNames[args[1].(string)]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

// scriptNames names the scripts by their SHA-1 and by their source.
var scriptNames = map[string]string{
	acquireScript.sha: "acquire", acquireScript.src: "acquire",
	reserveScript.sha: "reserve", reserveScript.src: "reserve",
	completeScript.sha: "complete", completeScript.src: "complete",
	getScript.sha: "get", getScript.src: "get",
}

// take returns the counts so far and starts again from zero.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

// newClient returns a client of the server at addr (the shared one when
// empty), closed when t ends, with its commands counted in cnt (if not nil).
func newClient(t testing.TB, addr string, cnt *counter, tune ...func(*redis.Options)) *redis.Client {
	t.Helper()
	if addr == "" {
		addr = os.Getenv("IDEM_REDIS_ADDR")
	}
	o := &redis.Options{Addr: addr, DisableIdentity: true}
	for _, f := range tune {
		f(o)
	}
	c := redis.NewClient(o)
	if cnt != nil {
		c.AddHook(cnt)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t:" + hex.EncodeToString(b[:]) + ":"
}

// newStore returns a store on the shared server under a prefix of its own.
func newStore(t testing.TB, client Client, opts ...Option) *Store {
	t.Helper()
	s, err := New(client, append([]Option{WithPrefix(uniquePrefix())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
