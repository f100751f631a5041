// Command demo runs idem's example service (examples/orders) on this machine,
// with no AWS account: `make demo`, or, once `make deps` has installed the
// local servers,
//
//	go run ./cmd/demo [-script-only] [-addr 127.0.0.1:8080] [-bin DIR] [-logs]
//
// It starts dynalite (DynamoDB API) and moto (SQS API) on 127.0.0.1, creates
// the idempotency, orders and ledger tables, the orders queue and its
// dead-letter queue (redrive after 2 receives), builds the idem command
// (cmd/idem) into -bin (default .cache/bin of the repository), and runs the
// example's two functions in this process: the same constructors the Lambda
// bootstraps call (orders.NewAPI, orders.NewConsumer), over the DynamoDB
// store. orders-api sends its OrderPlaced messages to moto's queue; an event
// source mapping (internal/esm) polls the queue and invokes orders-consumer
// with SQS events as Lambda does, deleting what it processed.
//
// It serves the orders API on 127.0.0.1 (translating HTTP requests into API
// Gateway HTTP API events) and runs a script against it: a new order, its
// retry, a conflicting reuse of the key, the OrderPlaced message consumed, a
// duplicate publish of it; then a poison message that the queue moves to its
// dead-letter queue, where the script leaves it. It then prints the
// operator's way back as commands to run by hand in another terminal, in
// order (steps.go): peek at the dead-letter queue and inspect the message's
// record with the idem command, fix the cause (POST /demo/fix-consumer
// deploys a consumer without its test hooks), release the key, redrive the
// dead-letter queue; then an order of one's own with curl. It leaves the API
// and the event source mapping running, printing each batch the consumer
// gets, until Ctrl-C (unless -script-only), and stops everything it started,
// the servers by their PIDs. It exits 0 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	restore := takeForeground()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	restore()
	var missing *notInstalledError
	switch {
	case errors.As(err, &missing):
		fmt.Fprintln(os.Stderr, missing.help())
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(os.Stdout, "stopped (interrupted)")
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// invocationTimeout is the deadline each API invocation gets.
const invocationTimeout = 10 * time.Second

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scriptOnly := fs.Bool("script-only", os.Getenv("IDEM_DEMO_SCRIPT_ONLY") == "1", "exit after the script (also IDEM_DEMO_SCRIPT_ONLY=1)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to serve the orders API on (127.0.0.1 only; a free port is used if it is taken)")
	logs := fs.Bool("logs", false, "print the functions' JSON decision logs to stderr")
	bin := fs.String("bin", "", "`directory` to build the idem command into (default: .cache/bin of the repository)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || host != "127.0.0.1" {
		return fmt.Errorf("-addr %q: the demo serves on 127.0.0.1 only", *addr)
	}

	st, err := startStack(ctx, stdout, stderr, *logs, *bin)
	if err != nil {
		return err
	}
	defer st.stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is taken; using %s instead\n", *addr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+fixPath, st.fixConsumer)
	mux.HandleFunc("/", st.serveAPI)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// Serve returns when srv is closed; a failed listener shows as the script's failed requests.
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }() // after Shutdown, or on an error already returned
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "idem demo: orders API on %s (DynamoDB store on dynalite, SQS on moto)\n\n", base)

	if err := st.script(ctx, base); err != nil {
		return err
	}
	if *scriptOnly {
		fmt.Fprintln(stdout, "\n-script-only: the servers stop now. Run `make demo` to take the operator's steps by hand.")
		return nil
	}
	return st.serve(ctx, srv, base)
}

// serve prints the steps to take by hand, runs the event source mapping and leaves the
// API up until ctx is done.
func (st *stack) serve(ctx context.Context, srv *http.Server, base string) error {
	steps, err := st.handSteps(ctx, base)
	if err != nil {
		return err
	}
	printSteps(st.out, steps)
	fmt.Fprintln(st.out, endOfSteps)
	live, err := st.newPoller(ctx, st.printBatch)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = live.Run(ctx) // nil when ctx is done; its poll errors go to st.printBatch
	}()
	<-ctx.Done()
	<-done
	fmt.Fprintln(st.out, "\nstopping")
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}
