// Command testenv runs a command against local servers that it starts first and stops
// afterwards: a DynamoDB-API server, with -sqs moto an SQS-API server, and with -redis a
// Redis server:
//
//	go run ./internal/cmd/testenv -server dynalite|moto|none [-sqs moto|none] [-redis] [-log FILE] -- COMMAND [ARG...]
//
// It starts the servers with internal/devserver on free ports of 127.0.0.1 and runs COMMAND
// with this process's environment plus, for the DynamoDB-API server (not with -server none):
//
//	AWS_ENDPOINT_URL_DYNAMODB  the server's endpoint, http://127.0.0.1:PORT
//	AWS_REGION                 us-east-1
//	AWS_ACCESS_KEY_ID          test
//	AWS_SECRET_ACCESS_KEY      test
//	IDEM_DDB_SERVER            dynalite or moto
//	IDEM_DDB_NO_TRANSACTIONS   1 with dynalite, which has no TransactWriteItems
//
// for the SQS-API server (with -sqs moto; moto serves both APIs, so -server moto -sqs moto
// starts one server):
//
//	AWS_ENDPOINT_URL_SQS       the server's endpoint, http://127.0.0.1:PORT
//	IDEM_SQS_SERVER            moto
//	AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY as above
//
// for the S3 API, which every moto server also serves (with -server moto or -sqs moto;
// S3 clients need path-style addressing against it):
//
//	AWS_ENDPOINT_URL_S3        the moto server's endpoint, http://127.0.0.1:PORT
//	IDEM_S3_SERVER             moto
//
// and in every case:
//
//	IDEM_RIE                   <repo>/.cache/bin/aws-lambda-rie, when that file exists
//	IDEM_REDIS_ADDR            with -redis: the Redis server's address, 127.0.0.1:PORT
//
// These replace values the caller had; every other variable passes through unchanged.
// SIGINT and SIGTERM are forwarded to COMMAND. The servers are stopped by their PIDs whatever
// happens, and testenv exits with COMMAND's exit code (128+N when a signal N ended it).
// When COMMAND fails, the end of each server's output is printed to stderr; -log FILE writes
// all of the first server's output (the DynamoDB-API server's; with -server none, the SQS
// server's or else Redis's) to FILE.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/idemgo/idem/internal/devserver"
)

func main() {
	os.Exit(run())
}

func run() int {
	server := flag.String("server", "dynalite", "DynamoDB-API server to start: dynalite, moto or none")
	sqsServer := flag.String("sqs", "none", "SQS-API server to start: moto or none (exports AWS_ENDPOINT_URL_SQS)")
	withRedis := flag.Bool("redis", false, "also start a Redis server and export IDEM_REDIS_ADDR")
	logFile := flag.String("log", "", "write the server's whole output to this file when it stops")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(),
			"usage: testenv -server dynalite|moto|none [-sqs moto|none] [-redis] [-log FILE] -- COMMAND [ARG...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		return 2
	}

	root, err := devserver.RepoRoot()
	if err != nil {
		return fail(err)
	}
	plan, err := planServers(*server, *sqsServer, *withRedis)
	if err != nil {
		return fail(err)
	}

	// Catch signals from now on, so that one arriving during start-up still stops the servers.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var srvs []*devserver.Server
	defer func() { stopAll(srvs, *logFile) }()
	for _, p := range plan {
		srv, err := p.start(context.Background(), root)
		if err != nil {
			if errors.Is(err, devserver.ErrNotInstalled) {
				return fail(fmt.Errorf("%w\nrun `make deps` to install the local servers", err))
			}
			return fail(err)
		}
		srvs = append(srvs, srv)
		p.roles.srv = srv
		fmt.Fprintf(os.Stderr, "testenv: %s at %s (pid %d)\n", srv.Name, srv.Endpoint, srv.PID)
	}

	select {
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "testenv: %v before the command started\n", sig)
		return 128 + int(sig.(syscall.Signal))
	default:
	}

	ddb, sqs, redis := roleServers(plan)
	code := runCommand(args, withEnv(os.Environ(), serverEnv(root, ddb, sqs, redis)), sigs)
	if code != 0 {
		for _, srv := range srvs {
			fmt.Fprintf(os.Stderr, "testenv: %s exited with %d; last lines of %s's output:\n%s\n",
				args[0], code, srv.Name, tail(srv.Log(), 30))
		}
	}
	return code
}

// roles says which APIs a started server serves.
type roles struct {
	ddb, sqs, redis bool
	srv             *devserver.Server // set once started
}

// planned is a server to start and what it serves.
type planned struct {
	start func(context.Context, string) (*devserver.Server, error)
	roles *roles
}

// planServers returns the servers to start, in order: the DynamoDB-API server, the SQS-API
// server (the same moto server when both are moto), Redis.
func planServers(server, sqsServer string, withRedis bool) ([]planned, error) {
	var plan []planned
	switch server {
	case "dynalite":
		plan = append(plan, planned{devserver.StartDynalite, &roles{ddb: true}})
	case "moto":
		plan = append(plan, planned{devserver.StartMoto, &roles{ddb: true, sqs: sqsServer == "moto"}})
	case "none":
	default:
		return nil, fmt.Errorf("-server %q: want dynalite, moto or none", server)
	}
	switch {
	case sqsServer == "moto" && server != "moto":
		plan = append(plan, planned{devserver.StartMoto, &roles{sqs: true}})
	case sqsServer != "moto" && sqsServer != "none":
		return nil, fmt.Errorf("-sqs %q: want moto or none", sqsServer)
	}
	if withRedis {
		plan = append(plan, planned{func(ctx context.Context, root string) (*devserver.Server, error) {
			return devserver.StartRedis(ctx, root)
		}, &roles{redis: true}})
	}
	return plan, nil
}

// roleServers returns the started servers of plan by role (nil: none).
func roleServers(plan []planned) (ddb, sqs, redis *devserver.Server) {
	for _, p := range plan {
		if p.roles.ddb {
			ddb = p.roles.srv
		}
		if p.roles.sqs {
			sqs = p.roles.srv
		}
		if p.roles.redis {
			redis = p.roles.srv
		}
	}
	return ddb, sqs, redis
}

// serverEnv returns the variables that point COMMAND at the servers (nil: not started).
func serverEnv(root string, ddb, sqs, redis *devserver.Server) map[string]string {
	env := map[string]string{}
	if ddb != nil || sqs != nil {
		env["AWS_REGION"] = "us-east-1"
		env["AWS_ACCESS_KEY_ID"] = "test"
		env["AWS_SECRET_ACCESS_KEY"] = "test"
	}
	if ddb != nil {
		env["AWS_ENDPOINT_URL_DYNAMODB"] = ddb.Endpoint
		env["IDEM_DDB_SERVER"] = ddb.Name
		if ddb.Name == "dynalite" {
			// dynalite answers TransactWriteItems with
			// UnknownOperationException: the transaction tests skip, saying so.
			env["IDEM_DDB_NO_TRANSACTIONS"] = "1"
		}
	}
	if sqs != nil {
		env["AWS_ENDPOINT_URL_SQS"] = sqs.Endpoint
		env["IDEM_SQS_SERVER"] = sqs.Name
	}
	for _, srv := range []*devserver.Server{ddb, sqs} {
		if srv != nil && srv.Name == "moto" {
			env["AWS_ENDPOINT_URL_S3"] = srv.Endpoint
			env["IDEM_S3_SERVER"] = srv.Name
		}
	}
	if redis != nil {
		env["IDEM_REDIS_ADDR"] = redis.Addr
	}
	if rie := filepath.Join(root, ".cache", "bin", "aws-lambda-rie"); fileExists(rie) {
		env["IDEM_RIE"] = rie
	}
	return env
}

// stopAll stops the servers by their PIDs and writes the first one's output to logFile.
func stopAll(srvs []*devserver.Server, logFile string) {
	for _, srv := range srvs {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	if logFile != "" && len(srvs) > 0 {
		if err := os.WriteFile(logFile, []byte(srvs[0].Log()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
}

// runCommand runs args with env, forwarding the signals that arrive on sigs, and returns
// its exit code.
func runCommand(args, env []string, sigs <-chan os.Signal) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	return exitCode(cmd.ProcessState, err)
}

// withEnv returns base with the variables in set replacing any earlier values.
func withEnv(base []string, set map[string]string) []string {
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// exitCode maps a finished command to a shell-style exit code.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
	return 1
}
