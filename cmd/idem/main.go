package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code. Interrupts
// (SIGINT, SIGTERM) cancel the command's context.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cli{stdin: os.Stdin, stdout: stdout, stderr: stderr, now: time.Now, sleep: sleepContext}
	return c.run(ctx, args)
}

// cli is one run of the command: its streams, its clock, read once per
// command, and how it waits (a rate limit's pauses; nil: sleepContext).
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	now            func() time.Time
	sleep          func(context.Context, time.Duration) error
}

// sleepContext waits for d, or until ctx ends (its error).
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const usage = `usage: idem COMMAND [FLAGS]

Commands:
  inspect       show the record of a key, an SQS message or an API request
  list          list records by status or key prefix
  release       delete a key's record (fenced), so that the key runs again;
                or every record of a state or verdict (--status, --verdict)
  stats         count records by status and result size
  dlq           peek at a dead-letter queue's messages, or redrive them,
                releasing the records that would not run again
  create-table  create the table a store needs (on demand, TTL on)
  version       print the command's version (also --version)

Run "idem COMMAND -h" for a command's flags. Exit codes: 0 ok, 1 error,
2 usage, 3 no record, 4 record changed, 5 not released (not confirmed or
lease live), 6 table not found, 7 key schema mismatch, 8 access denied,
9 AWS configuration (no credentials or region, a bad profile, an endpoint
that cannot be reached), 10 throttled or unavailable, 11 left behind (a
redrive or a bulk release did not do everything: see its report), 130
interrupted.
`

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage)
		return exitUsage
	}
	cmds := map[string]func(context.Context, []string) error{
		"inspect":      c.inspect,
		"list":         c.list,
		"release":      c.release,
		"stats":        c.stats,
		"dlq":          c.dlq,
		"create-table": c.createTable,
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, usage)
		return exitOK
	case "version", "-version", "--version":
		return c.printVersion()
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "idem: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	err := cmd(ctx, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}

// common are the flags of every command: the table, the store's layout
// (attribute names, sort key, key prefix), the AWS configuration and the
// output format.
type common struct {
	table                     string
	layout                    layoutFlags
	profile, region, endpoint string
	json                      bool
	fs                        *flag.FlagSet
	name                      string
	stderr                    io.Writer
}

func (c *cli) flags(name, synopsis string) *common {
	fs := flag.NewFlagSet("idem "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are reported once, by fail
	o := &common{fs: fs, name: name, stderr: c.stderr}
	fs.StringVar(&o.table, "table", os.Getenv("IDEM_TABLE"), "the idempotency `table` (or set IDEM_TABLE)")
	o.layout.register(fs)
	fs.StringVar(&o.profile, "profile", "", "AWS shared config `profile` (default $AWS_PROFILE or default)")
	fs.StringVar(&o.region, "region", "", "AWS `region` (default $AWS_REGION or the profile's)")
	fs.StringVar(&o.endpoint, "endpoint-url", "", "DynamoDB endpoint `URL` (default $AWS_ENDPOINT_URL_DYNAMODB, $AWS_ENDPOINT_URL or AWS's)")
	fs.BoolVar(&o.json, "json", false, "write JSON instead of tables")
	fs.Usage = func() {
		fs.SetOutput(c.stderr)
		fmt.Fprintf(c.stderr, "usage: idem %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return o
}

// parse parses args; positional arguments and a missing table are usage
// errors.
func (o *common) parse(args []string) error {
	if err := o.parseArgs(args); err != nil {
		return err
	}
	if o.table == "" {
		return usageErrorf("no table: pass --table or set IDEM_TABLE")
	}
	return nil
}

// parseArgs parses args; positional arguments are a usage error.
func (o *common) parseArgs(args []string) error {
	if err := o.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v (idem %s -h lists the flags)", err, o.name)
	}
	if o.fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (every value is given with a flag)", o.fs.Arg(0))
	}
	return nil
}
