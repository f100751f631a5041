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
       idem dlq redrive --queue-url URL [--to URL] [--json]

peek writes the dead-letter queue's messages (at most --max, 10) to stdout
as "aws sqs receive-message" prints them, the file "idem inspect
--sqs-event" reads, and leaves them in the queue (each peek counts as a
receive). redrive moves every message of the dead-letter queue to --to,
by default the one queue whose redrive policy names it, as new messages.
Both take --profile, --region and --endpoint-url (default
$AWS_ENDPOINT_URL_SQS or $AWS_ENDPOINT_URL).
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

// client returns an SQS client of the configuration the flags name.
func (c *cli) sqsClient(ctx context.Context, o *sqsFlags) (*sqs.Client, error) {
	cfg, err := c.awsConfig(ctx, o.profile, o.region)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if o.endpoint != "" {
			so.BaseEndpoint = aws.String(o.endpoint)
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
	client, err := c.sqsClient(ctx, o)
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

// redriveView is what redrive reports.
type redriveView struct {
	Moved int    `json:"moved"`
	From  string `json:"from"`
	To    string `json:"to"`
}

func (c *cli) dlqRedrive(ctx context.Context, args []string) error {
	o := c.sqsFlags("redrive")
	to := o.fs.String("to", "", "the queue `URL` to move the messages to (default: the one queue whose redrive policy names --queue-url)")
	asJSON := o.fs.Bool("json", false, "write JSON instead of a sentence")
	if err := o.parse(args); err != nil {
		return err
	}
	client, err := c.sqsClient(ctx, o)
	if err != nil {
		return err
	}
	if *to == "" {
		if *to, err = dlq.SourceQueue(ctx, client, o.queueURL); errors.Is(err, dlq.ErrNoSingleSource) {
			return usageErrorf("%v: pass --to with the queue to move the messages to", err)
		} else if err != nil {
			return err
		}
	}
	n, err := dlq.Redrive(ctx, client, o.queueURL, *to)
	v := redriveView{Moved: n, From: o.queueURL, To: *to}
	if *asJSON {
		if werr := writeJSON(c.stdout, v); werr != nil && err == nil {
			err = werr
		}
		return err
	}
	fmt.Fprintf(c.stdout, "moved %s from %s to %s\n", count(n, "message"), v.From, v.To)
	return err
}
