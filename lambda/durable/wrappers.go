package durable

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// The wrappers are idemlambda's, with d.start as the handler: the key
// sources, envelopes, fingerprints, the batch engine and its reporting rules,
// logs and metrics are theirs, unchanged.

// SQS returns the handler of SQS batches that starts one durable execution
// per event: idemlambda.SQS(runner, action, key, handler, opts...) with the
// start of d's durable function as the handler. The execution is named
// after the message's stored key (ExecutionName) and given its body (with
// idemlambda.WithEnvelope, the message inside the envelope); see the package
// documentation for the verdicts and what is reported.
func SQS(runner *idem.Runner, action string, key idemlambda.KeySource, d *Dispatcher, opts ...idemlambda.BatchOption) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.SQS(runner, action, key, func(ctx context.Context, _ events.SQSMessage) ([]byte, error) {
		return d.start(ctx)
	}, opts...)
}

// SNS returns the handler of SNS events that starts one durable execution per
// message: idemlambda.SNS with the start of d's durable function as the
// handler (see SQS).
func SNS(runner *idem.Runner, action string, key idemlambda.KeySource, d *Dispatcher, opts ...idemlambda.BatchOption) (func(context.Context, events.SNSEvent) error, error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.SNS(runner, action, key, func(ctx context.Context, _ events.SNSEventRecord) ([]byte, error) {
		return d.start(ctx)
	}, opts...)
}

// Kinesis returns the handler of Kinesis batches that starts one durable
// execution per record, each shard in order: idemlambda.Kinesis with the
// start of d's durable function as the handler. The execution is given the
// record's data (JSON; UTF-8 text as a JSON string; other bytes as
// {"base64": ...}).
func Kinesis(runner *idem.Runner, action string, key idemlambda.KinesisKeySource, d *Dispatcher, opts ...idemlambda.BatchOption) (func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.Kinesis(runner, action, key, func(ctx context.Context, _ events.KinesisEventRecord) ([]byte, error) {
		return d.start(ctx)
	}, opts...)
}

// DynamoDBStream returns the handler of DynamoDB Streams batches that starts
// one durable execution per record, each shard in order:
// idemlambda.DynamoDBStream with the start of d's durable function as the
// handler. The execution is given what the wrapper fingerprints:
// {"eventName", "Keys", "NewImage", "OldImage"} in DynamoDB's typed JSON.
func DynamoDBStream(runner *idem.Runner, action string, key idemlambda.DynamoDBKeySource, d *Dispatcher, opts ...idemlambda.BatchOption) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.DynamoDBStream(runner, action, key, func(ctx context.Context, _ events.DynamoDBEventRecord) ([]byte, error) {
		return d.start(ctx)
	}, opts...)
}

// Typed returns the handler of any other event type In (an EventBridge rule
// or a schedule that targets the dispatcher, a direct invocation) that
// starts one durable execution per key: idemlambda.Typed with the start of
// d's durable function as the handler. keyFn gives the event's stored key
// (idemlambda.EventKey of its identity and the action); the execution is
// given the event as JSON. Errors are the runner's, passed through as they
// are, for the invoker's retries to see.
func Typed[In any](runner *idem.Runner, keyFn func(In) (string, error), d *Dispatcher, opts ...idemlambda.Option) (func(context.Context, In) (Started, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.Typed(runner, keyFn, func(ctx context.Context, _ In) (Started, error) {
		b, err := d.start(ctx)
		if err != nil {
			return Started{}, err
		}
		var s Started
		return s, json.Unmarshal(b, &s)
	}, opts...)
}

var errNilDispatcher = errors.New("durable: nil Dispatcher")
