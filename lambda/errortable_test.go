package idemlambda_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// errorKind is a row of the error table of docs/errors-and-retries.md as
// this test runs it: the runner's options and the handler's error on a
// delivery (cancel cancels the invocation's context).
type errorKind struct {
	opts []idem.Option
	err  func(delivery int, cancel context.CancelFunc) error
}

// errorKinds finds a row's kind by what its first cell names.
var errorKinds = []struct {
	marker string
	kind   errorKind
}{
	// The row of the bound before those of the kinds it names.
	{"`WithMaxAttempts`", errorKind{[]idem.Option{idem.WithMaxAttempts(1)}, func(int, context.CancelFunc) error {
		return core.MarkTransient(errors.New("warehouse 503"))
	}}},
	{"`idem.WithUnclassifiedPermanent()`", errorKind{[]idem.Option{idem.WithUnclassifiedPermanent()}, func(int, context.CancelFunc) error {
		return errors.New("warehouse said no")
	}}},
	{"`core.MarkTransient`", errorKind{nil, func(int, context.CancelFunc) error { return core.MarkTransient(errors.New("warehouse 503")) }}},
	{"`errors.New`", errorKind{nil, func(int, context.CancelFunc) error { return errors.New("warehouse said no") }}},
	{"`core.MarkPermanent`", errorKind{nil, func(int, context.CancelFunc) error { return core.MarkPermanent(errors.New("no such order")) }}},
	{"`core.MarkRetryLater`", errorKind{nil, func(int, context.CancelFunc) error { return core.MarkRetryLater(errors.New("answered 503")) }}},
	{"cancelled", errorKind{nil, func(delivery int, cancel context.CancelFunc) error {
		if delivery == 1 {
			cancel()
			return fmt.Errorf("the caller hung up: %w", context.Canceled)
		}
		return errors.New("warehouse said no")
	}}},
}

// TestErrorTableSaysWhatTheCodeDoes runs each row of the table "what each
// kind of error gets" through the SQS wrapper, two deliveries of one
// message, and checks each cell: whether the first delivery retried the
// handler, what it stored (and its verdict), whether it was reported, and
// whether the second delivery ran the handler (or what it answered).
func TestErrorTableSaysWhatTheCodeDoes(t *testing.T) {
	b, err := os.ReadFile("../docs/errors-and-retries.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "| error kind | retried in the call? | stored | reported? | runs again on redelivery? |"):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if len(cells) != 5 {
				t.Fatalf("row %q has %d cells, want 5", line, len(cells))
			}
			rows++
			t.Run(cells[0], func(t *testing.T) { checkErrorRow(t, cells) })
		default:
			in = false
		}
	}
	if rows < len(errorKinds) {
		t.Fatalf("the table has %d rows, want one for each of the %d kinds", rows, len(errorKinds))
	}
}

// verdictIn is the first verdict name in a cell.
var verdictIn = regexp.MustCompile("`([a-z]+_[a-z_]+)`")

func checkErrorRow(t *testing.T, cells []string) {
	var kind *errorKind
	for _, k := range errorKinds {
		if strings.Contains(cells[0], k.marker) {
			kind = &k.kind
			break
		}
	}
	if kind == nil {
		t.Fatalf("no error kind of this test fits the row %q", cells[0])
	}
	var obs observed
	e := newEnv(t, append([]idem.Option{idem.WithObserver(&obs), idem.WithRetry(3, time.Millisecond, time.Millisecond)}, kind.opts...)...)
	runs, delivery := 0, 0
	var cancel context.CancelFunc
	source := idemlambda.KeyFromBodyField("event_id")
	handle, err := idemlambda.SQS(e.runner, "ship", source, func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		runs++
		return nil, kind.err(delivery, cancel)
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := sqsMsg("m-1", `{"event_id":"evt-1"}`)
	deliver := func() (reported bool, verdict string, ran int) {
		delivery++
		var ctx context.Context
		ctx, cancel = context.WithCancel(e.ctx(t, time500s))
		defer cancel()
		before := runs
		resp, _ := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
		vs := verdicts(obs.take())
		if len(vs) != 1 {
			t.Fatalf("delivery %d: verdicts %v, want one", delivery, vs)
		}
		return len(resp.BatchItemFailures) == 1, vs[0], runs - before
	}
	reported, verdict, ran := deliver()
	if retried := strings.HasPrefix(cells[1], "yes"); !strings.HasPrefix(cells[1], "as its kind") && retried != (ran > 1) {
		t.Errorf("retried in the call: the table says %q, the handler ran %d times in the first delivery", cells[1], ran)
	}
	key, err := idemlambda.SQSKey(source, "ship", msg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.store.Get(context.Background(), key, e.clock.Now())
	retryable := strings.Contains(cells[2], "retryable")
	if err != nil || rec.Status != core.StatusFailed || rec.Retryable != retryable {
		t.Errorf("stored: the table says %q, the store holds %v (%v)", cells[2], rec, err)
	}
	if m := verdictIn.FindStringSubmatch(cells[2]); m == nil || m[1] != verdict {
		t.Errorf("stored: the table says %q, the first delivery's verdict is %s", cells[2], verdict)
	}
	if want := strings.HasPrefix(cells[3], "yes"); reported != want {
		t.Errorf("reported: the table says %q, the wrapper reported it: %v", cells[3], reported)
	}
	_, again, ranAgain := deliver()
	if want := strings.HasPrefix(cells[4], "yes"); (ranAgain > 0) != want {
		t.Errorf("runs again: the table says %q, the second delivery ran the handler %d times (%s)", cells[4], ranAgain, again)
	}
	if m := verdictIn.FindStringSubmatch(cells[4]); m != nil && m[1] != again {
		t.Errorf("runs again: the table says %q, the second delivery's verdict is %s", cells[4], again)
	}
}
