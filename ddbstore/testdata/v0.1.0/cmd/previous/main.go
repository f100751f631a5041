// Command previous runs calls of idem v0.1.0, the previous release, over a
// DynamoDB table that the current release wrote: ddbstore's
// TestPreviousReleaseReadsThisOnesRecords builds it from this module (the
// packages idem, core, ddbstore, blob, awsclassify and internal/fit as
// v0.1.0 released them) and reads what it answers.
//
// It reads, from standard input, {"table": ..., "now_ms": ..., "calls":
// [{"key": ..., "payload": ..., "steps": [...]}]}, and for each call runs
// v0.1.0's Runner.Do at now_ms over ddbstore on the table at
// AWS_ENDPOINT_URL_DYNAMODB (or AWS_ENDPOINT_URL), with a handler that
// runs the steps named (idem.Step) and returns "ran by v0.1.0". It writes
// one JSON answer per call to standard output: the verdict, the error, the
// result, whether the result was omitted, whether the handler ran, and for
// each step whether its function ran and the result Step returned.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
)

type input struct {
	Table string `json:"table"`
	NowMs int64  `json:"now_ms"`
	Calls []call `json:"calls"`
}

type call struct {
	Key     string   `json:"key"`
	Payload string   `json:"payload"`
	Steps   []string `json:"steps"`
}

type stepAnswer struct {
	Name   string `json:"name"`
	Ran    bool   `json:"ran"`
	Result []byte `json:"result"`
	Err    string `json:"error,omitempty"`
}

type answer struct {
	Key     string       `json:"key"`
	Verdict string       `json:"verdict"`
	Err     string       `json:"error,omitempty"`
	Result  []byte       `json:"result"`
	Omitted bool         `json:"omitted"`
	Ran     bool         `json:"ran"`
	Steps   []stepAnswer `json:"steps"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "previous:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	var in input
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return err
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		RetryMaxAttempts: 1,
	})
	store, err := ddbstore.New(client, in.Table)
	if err != nil {
		return err
	}
	now := time.UnixMilli(in.NowMs)
	runner, err := idem.New(store, idem.WithClock(func() time.Time { return now }),
		idem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for _, c := range in.Calls {
		if err := enc.Encode(do(runner, c)); err != nil {
			return err
		}
	}
	return nil
}

// do makes one call and describes what happened.
func do(runner *idem.Runner, c call) answer {
	a := answer{Key: c.Key}
	out, err := runner.Do(context.Background(), c.Key, []byte(c.Payload), func(ctx context.Context) ([]byte, error) {
		a.Ran = true
		for _, name := range c.Steps {
			s := stepAnswer{Name: name}
			res, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) {
				s.Ran = true
				return []byte(`"` + name + ` by v0.1.0"`), nil
			})
			s.Result = res
			if err != nil {
				s.Err = err.Error()
			}
			a.Steps = append(a.Steps, s)
			if err != nil {
				return nil, err
			}
		}
		return []byte(`"ran by v0.1.0"`), nil
	})
	a.Verdict, a.Result, a.Omitted = out.Verdict.String(), out.Result, out.ResultOmitted
	if err != nil {
		a.Err = err.Error()
	}
	return a
}
