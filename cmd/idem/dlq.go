package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/internal/dlq"
)

const dlqUsage = `usage: idem dlq peek    --queue-url URL [--max N]
       idem dlq redrive --queue-url URL ` + redriveSynopsis + `

peek writes the dead-letter queue's messages (at most --max, 10) to stdout
as "aws sqs receive-message" prints them, the file "idem inspect
--sqs-event" reads, and leaves them in the queue (each peek counts as a
receive). redrive moves every message of the dead-letter queue to --to,
by default the one queue whose redrive policy names it, as new messages;
first, it releases (fenced) the record of each message that would not run
again on its own (a permanent failure, retries exhausted), computing the
key with the function's key configuration. --dry-run says what it would
do and changes nothing. Both take --profile, --region and --endpoint-url
(default $AWS_ENDPOINT_URL_SQS or $AWS_ENDPOINT_URL; for redrive, the
endpoint of DynamoDB too).
`

// sqsFlags are the flags of the dlq commands.
type sqsFlags struct {
	queueURL                  string
	profile, region, endpoint string
	fs                        *flag.FlagSet
	name                      string
}

func (c *cli) sqsFlags(name string) *sqsFlags {
	fs := flag.NewFlagSet("idem dlq "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &sqsFlags{fs: fs, name: name}
	fs.StringVar(&o.queueURL, "queue-url", "", "the dead-letter queue's `URL`")
	fs.StringVar(&o.profile, "profile", "", "AWS shared config `profile` (default $AWS_PROFILE or default)")
	fs.StringVar(&o.region, "region", "", "AWS `region` (default $AWS_REGION or the profile's)")
	fs.StringVar(&o.endpoint, "endpoint-url", "", "SQS endpoint `URL` (default $AWS_ENDPOINT_URL_SQS, $AWS_ENDPOINT_URL or AWS's)")
	fs.Usage = func() {
		fs.SetOutput(c.stderr)
		fmt.Fprintf(c.stderr, "%s\nFlags of %s:\n", dlqUsage, name)
		fs.PrintDefaults()
	}
	return o
}

func (o *sqsFlags) parse(args []string) error {
	if err := o.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v (idem dlq %s -h lists the flags)", err, o.name)
	}
	if o.fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (every value is given with a flag)", o.fs.Arg(0))
	}
	if o.queueURL == "" {
		return usageErrorf("no queue: pass --queue-url with the dead-letter queue's URL")
	}
	return nil
}

// sqsClient returns an SQS client of the configuration profile, region and
// endpoint name (each may be empty: the SDK's default).
func (c *cli) sqsClient(ctx context.Context, profile, region, endpoint string) (*sqs.Client, error) {
	cfg, err := c.awsConfig(ctx, profile, region)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

func (c *cli) dlq(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErrorf("idem dlq needs a command: peek or redrive\n\n%s", dlqUsage)
	}
	switch args[0] {
	case "peek":
		return c.dlqPeek(ctx, args[1:])
	case "redrive":
		return c.dlqRedrive(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, dlqUsage)
		return nil
	}
	return usageErrorf("unknown dlq command %q: want peek or redrive", args[0])
}

func (c *cli) dlqPeek(ctx context.Context, args []string) error {
	o := c.sqsFlags("peek")
	max := o.fs.Int("max", dlq.MaxPeek, "peek at most this many `messages` (1 to 10)")
	if err := o.parse(args); err != nil {
		return err
	}
	if *max < 1 || *max > dlq.MaxPeek {
		return usageErrorf("--max %d: want 1 to %d", *max, dlq.MaxPeek)
	}
	client, err := c.sqsClient(ctx, o.profile, o.region, o.endpoint)
	if err != nil {
		return err
	}
	msgs, err := dlq.Peek(ctx, client, o.queueURL, *max)
	if err != nil {
		return err
	}
	data, err := dlq.ReceiveAnswer(msgs)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(c.stdout, "%s\n", data); err != nil {
		return err
	}
	if len(msgs) == 0 {
		fmt.Fprintf(c.stderr, "idem: no visible message in %s\n", o.queueURL)
		return nil
	}
	fmt.Fprintf(c.stderr, "idem: %s of %s, left in the queue\n", count(len(msgs), "message"), o.queueURL)
	return nil
}
