// Command testenv runs a command against local servers that it starts first and stops
// afterwards: a DynamoDB-API server and, with -redis, a Redis server:
//
//	go run ./internal/cmd/testenv -server dynalite|moto|none [-redis] [-log FILE] -- COMMAND [ARG...]
//
// It starts the servers with internal/devserver on free ports of 127.0.0.1 and runs COMMAND
// with this process's environment plus, for the DynamoDB-API server (not with -server none):
//
//	AWS_ENDPOINT_URL_DYNAMODB  the server's endpoint, http://127.0.0.1:PORT
//	AWS_REGION                 us-east-1
//	AWS_ACCESS_KEY_ID          test
//	AWS_SECRET_ACCESS_KEY      test
//	IDEM_DDB_SERVER            dynalite or moto
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
// all of the DynamoDB-API server's output (or, with -server none, Redis's) to FILE.
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
	withRedis := flag.Bool("redis", false, "also start a Redis server and export IDEM_REDIS_ADDR")
	logFile := flag.String("log", "", "write the server's whole output to this file when it stops")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(),
			"usage: testenv -server dynalite|moto|none [-redis] [-log FILE] -- COMMAND [ARG...]\n")
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
	var starts []func(context.Context, string) (*devserver.Server, error)
	switch *server {
	case "dynalite":
		starts = append(starts, devserver.StartDynalite)
	case "moto":
		starts = append(starts, devserver.StartMoto)
	case "none":
	default:
		return fail(fmt.Errorf("-server %q: want dynalite, moto or none", *server))
	}
	if *withRedis {
		starts = append(starts, func(ctx context.Context, root string) (*devserver.Server, error) {
			return devserver.StartRedis(ctx, root)
		})
	}

	// Catch signals from now on, so that one arriving during start-up still stops the servers.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var srvs []*devserver.Server
	defer func() { stopAll(srvs, *logFile) }()
	for _, start := range starts {
		srv, err := start(context.Background(), root)
		if err != nil {
			if errors.Is(err, devserver.ErrNotInstalled) {
				return fail(fmt.Errorf("%w\nrun `make deps` to install the local servers", err))
			}
			return fail(err)
		}
		srvs = append(srvs, srv)
		fmt.Fprintf(os.Stderr, "testenv: %s at %s (pid %d)\n", srv.Name, srv.Endpoint, srv.PID)
	}

	select {
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "testenv: %v before the command started\n", sig)
		return 128 + int(sig.(syscall.Signal))
	default:
	}

	code := runCommand(args, withEnv(os.Environ(), serverEnv(root, srvs)), sigs)
	if code != 0 {
		for _, srv := range srvs {
			fmt.Fprintf(os.Stderr, "testenv: %s exited with %d; last lines of %s's output:\n%s\n",
				args[0], code, srv.Name, tail(srv.Log(), 30))
		}
	}
	return code
}

// serverEnv returns the variables that point COMMAND at the servers.
func serverEnv(root string, srvs []*devserver.Server) map[string]string {
	env := map[string]string{}
	for _, srv := range srvs {
		if srv.Name == "redis" {
			env["IDEM_REDIS_ADDR"] = srv.Addr
			continue
		}
		env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.Endpoint
		env["AWS_REGION"] = "us-east-1"
		env["AWS_ACCESS_KEY_ID"] = "test"
		env["AWS_SECRET_ACCESS_KEY"] = "test"
		env["IDEM_DDB_SERVER"] = srv.Name
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
