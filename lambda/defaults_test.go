package idemlambda_test

// What the batch wrappers do with no option at all, as the README's example
// runs them: every record that did not succeed is reported (so that the
// queue's redrive policy, or the stream's retry limit and failure
// destination, takes it), logged once with its verdict, its hashed key and
// its message id or sequence number, and observed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/logtest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// observed collects the runner's observations; safe for concurrent use.
type observed struct {
	mu  sync.Mutex
	obs []idem.Observation
}

func (o *observed) Observe(_ context.Context, ob idem.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, ob)
}

// take returns the observations so far and forgets them.
func (o *observed) take() []idem.Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.obs
	o.obs = nil
	return out
}

// verdicts names the verdicts of obs, in order.
func verdicts(obs []idem.Observation) []string {
	out := []string{}
	for _, o := range obs {
		out = append(out, o.Verdict.String())
	}
	return out
}

// captureStdout runs fn with os.Stdout redirected and returns what was
// written to it. Not for parallel tests.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() {
		os.Stdout = saved
	}()
	fn()
	os.Stdout = saved
	w.Close()
	return <-done
}

// inLambda sets the environment Lambda gives a provided.al2023 function
// whose LoggingConfig has LogFormat JSON (ApplicationLogLevel: INFO when not
// set otherwise).
func inLambda(t *testing.T, level string) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer")
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
	t.Setenv("AWS_LAMBDA_LOG_FORMAT", "JSON")
	t.Setenv("AWS_LAMBDA_LOG_LEVEL", level)
}

// jsonLines decodes each line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any { return logtest.JSONLines(t, out) }

// recordsOf returns the records of recs whose attribute name is value.
func recordsOf(recs []map[string]any, name, value string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r[name] == value {
			out = append(out, r)
		}
	}
	return out
}

// The cases of a new user's trial, over memstore with the README's example
// as it is (no option): an ordinary error, an outage that outlasts the
// queue's limit, an outage that ends before it, a key field misspelt. A
// message that did not succeed is reported on every delivery, so that SQS
// delivers it again until its redrive policy moves it to the dead-letter
// queue; the handler runs on every receive (an outage uses the runner's
// in-process tries on each, which never count toward a bound); each delivery
// leaves one log record (with no logger configured: in Lambda, on standard
// output, from WARN up) and one observation.
func TestSQSDefaultsReportWhatDidNotSucceed(t *testing.T) {
	smtpErr := errors.New("535 authentication failed")
	outageUntil := func(last int) func(int) error {
		return func(receive int) error {
			if receive <= last {
				return core.MarkTransient(errors.New("smtp: connection refused"))
			}
			return nil
		}
	}
	type delivery struct {
		verdict string
		runs    int // the handler's runs so far
	}
	for _, tc := range []struct {
		name       string
		key        idemlambda.KeySource
		handler    func(receive int) error
		want       []delivery
		storeCalls int // of the last delivery
	}{
		{
			name:    "ordinary error",
			key:     idemlambda.KeyFromBodyField("event_id"),
			handler: func(int) error { return fmt.Errorf("send notification: %w", smtpErr) },
			want:    []delivery{{"failed_unclassified", 1}, {"failed_unclassified", 2}, {"failed_unclassified", 3}, {"failed_unclassified", 4}, {"failed_unclassified", 5}},
			// the one-write retry of a retryable failure, and its outcome
			storeCalls: 2,
		},
		{
			name:       "outage past the queue's limit",
			key:        idemlambda.KeyFromBodyField("event_id"),
			handler:    outageUntil(5),
			want:       []delivery{{"failed_transiently", 3}, {"failed_transiently", 6}, {"failed_transiently", 9}, {"failed_transiently", 12}, {"failed_transiently", 15}},
			storeCalls: 2,
		},
		{
			name:       "outage through receives 1-4",
			key:        idemlambda.KeyFromBodyField("event_id"),
			handler:    outageUntil(4),
			want:       []delivery{{"failed_transiently", 3}, {"failed_transiently", 6}, {"failed_transiently", 9}, {"failed_transiently", 12}, {"executed", 13}},
			storeCalls: 2,
		},
		{
			name:       "key field misspelt",
			key:        idemlambda.KeyFromBodyField("eventId"),
			handler:    func(int) error { return nil },
			want:       []delivery{{"missing_key", 0}, {"missing_key", 0}},
			storeCalls: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inLambda(t, "")
			var obs observed
			runs := 0
			var handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
			stdout := captureStdout(t, func() {
				e := newEnv(t, idem.WithObserver(&obs))
				var err error
				handler, err = idemlambda.SQS(e.runner, "notify", tc.key, func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
					runs++
					receive, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
					return nil, tc.handler(receive)
				})
				if err != nil {
					t.Fatal(err)
				}
				for i, want := range tc.want {
					m := sqsMsg("m-1", `{"event_id":"evt-1","to":"ada@example.com"}`)
					m.Attributes["ApproximateReceiveCount"] = fmt.Sprint(i + 1)
					resp, _ := handler(e.ctx(t, time500s), events.SQSEvent{Records: []events.SQSMessage{m}})
					wantReported := []string{"m-1"}
					if want.verdict == "executed" {
						wantReported = []string{}
					}
					if got := failureIDs(resp); !slices.Equal(got, wantReported) {
						t.Errorf("delivery %d: batchItemFailures = %v, want %v", i+1, got, wantReported)
					}
					if runs != want.runs {
						t.Errorf("delivery %d: handler ran %d times in all, want %d", i+1, runs, want.runs)
					}
					got := obs.take()
					if vs := verdicts(got); !slices.Equal(vs, []string{want.verdict}) {
						t.Errorf("delivery %d: observed %v, want [%s]", i+1, vs, want.verdict)
					} else if i == len(tc.want)-1 && got[0].StoreCalls != tc.storeCalls {
						t.Errorf("delivery %d: %d store calls, want %d", i+1, got[0].StoreCalls, tc.storeCalls)
					}
				}
			})
			var logged []delivery // the deliveries the default level logs: all but a success
			for _, d := range tc.want {
				if d.verdict != "executed" {
					logged = append(logged, d)
				}
			}
			recs := recordsOf(jsonLines(t, stdout), "message_id", "m-1")
			if len(recs) != len(logged) {
				t.Fatalf("%d log records name m-1, want one per delivery that did not succeed (%d):\n%s", len(recs), len(logged), stdout)
			}
			for i, r := range recs {
				if r["verdict"] != logged[i].verdict || r["level"] == "INFO" || r["key_hash"] == nil && logged[i].verdict != "missing_key" ||
					r["verdict"] == "failed_unclassified" && r["level"] != "ERROR" {
					t.Errorf("record %d = %v, want verdict %s at WARN or ERROR (ERROR if unclassified) with its key_hash", i+1, r, logged[i].verdict)
				}
			}
		})
	}
}

// time500s is a time left far enough to never stop a record for lack of
// time.
const time500s = 500 * time.Second

// newJSONLogger logs JSON records to w, from DEBUG up.
func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Kinesis and DynamoDB Streams make the same verdicts their shard's
// checkpoint, with no option: a permanent failure (new or replayed), a key
// that cannot be found, retries exhausted, a key reused with another payload.
func TestStreamDefaultsCheckpointWhatDidNotSucceed(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   string
		want string
	}{
		{"permanent error", "permanent", "failed_permanently"},
		{"ordinary error", "error", "failed_unclassified"},
		{"missing key", "nokey", "missing_key"},
	} {
		t.Run("kinesis/"+tc.name, func(t *testing.T) {
			recs := []events.KinesisEventRecord{k(1, "a", "ok"), k(2, "b", tc.do), k(3, "c", "ok")}
			if tc.do == "nokey" {
				recs[1] = kinRec(0, 2, `{"eventId":"b"}`)
			}
			checkpointTwice(t, recs, kinesisBuild(idemlambda.KinesisKeyFromDataField("event_id")), tc.want)
		})
		t.Run("dynamodb/"+tc.name, func(t *testing.T) {
			recs := []events.DynamoDBEventRecord{d(1, "a", "ok"), d(2, "b", tc.do), d(3, "c", "ok")}
			if tc.do == "nokey" {
				recs[1] = ddbRec(2, "REMOVE", "b", "ok") // no NewImage
			}
			checkpointTwice(t, recs, dynamoDBBuild(idemlambda.DynamoDBKeyFromNewImage("id")), tc.want)
		})
	}
}

// streamBuild makes a stream wrapper over e with h's behaviours.
type streamBuild[R any] func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []R) ([]string, error), error)

// observedStream makes the stream wrapper build makes, with no option, over
// an env whose verdicts obs records.
func observedStream[R any](t *testing.T, build streamBuild[R]) (func(context.Context, []R) ([]string, error), *env, *streamHandler, *observed) {
	t.Helper()
	obs := &observed{}
	e := newEnv(t, idem.WithObserver(obs))
	h := &streamHandler{clock: e.clock}
	handle, err := build(e, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return handle, e, h, obs
}

// checkpointTwice delivers recs twice through the stream wrapper build
// makes, with no option, and checks that the second record, whose verdict
// is want (then replayed_failure, for a failure), is the checkpoint both
// times and that the record after it never runs.
func checkpointTwice[R any](t *testing.T, recs []R, build streamBuild[R], want string) {
	t.Helper()
	handle, e, h, obs := observedStream(t, build)
	for delivery := 1; delivery <= 2; delivery++ {
		got, _ := handle(e.ctx(t, time500s), recs)
		if !slices.Equal(got, cp(2)) {
			t.Errorf("delivery %d: checkpoints = %v, want %v: the shard acknowledged %s", delivery, got, cp(2), want)
		}
		if vs := verdicts(obs.take()); !slices.Contains(vs, want) && !slices.Contains(vs, "replayed_failure") {
			t.Errorf("delivery %d: observed %v, want %s among them", delivery, vs, want)
		}
	}
	if n := h.runs.get("c"); n != 0 {
		t.Errorf("the record after the checkpoint ran %d times, want 0", n)
	}
}

// A shard whose record fails with an ordinary error stops at it, Lambda
// delivers it again from there, and the handler runs on each delivery: once
// the record succeeds, the shard moves on to the records after it.
func TestStreamOrdinaryErrorMovesOnOnceTheRecordSucceeds(t *testing.T) {
	t.Run("kinesis", func(t *testing.T) {
		moveOn(t, []events.KinesisEventRecord{k(1, "a", "ok"), k(2, "b", "error_twice"), k(3, "c", "ok")},
			kinesisBuild(idemlambda.KinesisKeyFromDataField("event_id")))
	})
	t.Run("dynamodb", func(t *testing.T) {
		moveOn(t, []events.DynamoDBEventRecord{d(1, "a", "ok"), d(2, "b", "error_twice"), d(3, "c", "ok")},
			dynamoDBBuild(idemlambda.DynamoDBKeyFromNewImage("id")))
	})
}

// moveOn delivers recs as Lambda does, from the last checkpoint on, until
// the shard has none, and checks that the second record, which fails twice
// with an ordinary error, ran on each delivery and that the third ran once
// after it succeeded.
func moveOn[R any](t *testing.T, recs []R, build streamBuild[R]) {
	t.Helper()
	handle, e, h, obs := observedStream(t, build)
	batch := recs
	var got [][]string
	for delivery := 1; delivery <= 5 && len(batch) > 0; delivery++ {
		cps, _ := handle(e.ctx(t, time500s), batch)
		got = append(got, verdicts(obs.take()))
		batch = nil
		if slices.Equal(cps, cp(2)) {
			batch = recs[1:] // Lambda retries from the checkpoint
		} else if len(cps) != 0 {
			t.Fatalf("delivery %d: checkpoints = %v, want %v or none", delivery, cps, cp(2))
		}
	}
	want := [][]string{{"executed", "failed_unclassified", "blocked"}, {"failed_unclassified", "blocked"}, {"executed", "executed"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("verdicts per delivery = %v, want %v", got, want)
	}
	if b, c := h.runs.get("b"), h.runs.get("c"); b != 3 || c != 1 {
		t.Errorf("the failing record ran %d times and the one after it %d; want 3 and 1", b, c)
	}
}

// A stream record whose retries are exhausted, or whose key was used with
// another payload, is its shard's checkpoint too.
func TestStreamDefaultsCheckpointExhaustedAndReused(t *testing.T) {
	e := newEnv(t)
	h := &streamHandler{clock: e.clock}
	handler, err := idemlambda.Kinesis(e.runner, "book", idemlambda.KinesisKeyFromDataField("event_id"), h.kinesis)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, time500s)
	first, _ := handler(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{k(1, "a", "ok")}})
	if len(first.BatchItemFailures) != 0 {
		t.Fatalf("first batch: %v", first.BatchItemFailures)
	}
	// The same event id put again with another payload.
	resp, _ := handler(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{k(2, "a", "other"), k(3, "b", "ok")}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != seqN(2) {
		t.Errorf("key reused: checkpoints = %v, want [%s]", resp.BatchItemFailures, seqN(2))
	}
	// Transient until the attempts are used up.
	for delivery := 1; delivery <= 3; delivery++ {
		resp, _ = handler(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{k(4, "t", "transient")}})
		if len(resp.BatchItemFailures) != 1 {
			t.Errorf("transient, delivery %d: checkpoints = %v, want [%s]", delivery, resp.BatchItemFailures, seqN(4))
		}
	}
}

// With no logger given to the runner, its records of what did not succeed
// still reach the log: in Lambda, standard output as JSON; and the one
// logger option, the runner's, carries the wrappers' records.
func TestDefaultLogInLambda(t *testing.T) {
	inLambda(t, "")
	stdout := captureStdout(t, func() {
		r, err := idem.New(memstore.New())
		if err != nil {
			t.Fatal(err)
		}
		handler, err := idemlambda.SQS(r, "notify", idemlambda.KeyFromBodyField("event_id"), func(_ context.Context, m events.SQSMessage) ([]byte, error) {
			if m.MessageId == "m-bad" {
				return nil, errors.New("declined")
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
			sqsMsg("m-ok", `{"event_id":"evt-ok"}`), sqsMsg("m-bad", `{"event_id":"evt-bad"}`),
		}})
	})
	recs := jsonLines(t, stdout)
	bad := recordsOf(recs, "message_id", "m-bad")
	if len(bad) != 1 || bad[0]["verdict"] != "failed_unclassified" || bad[0]["key_hash"] == nil || bad[0]["level"] != "ERROR" {
		t.Fatalf("records of m-bad = %v, want one ERROR record with its verdict and key_hash; all:\n%s", bad, stdout)
	}
	if ok := recordsOf(recs, "message_id", "m-ok"); len(ok) != 0 {
		t.Errorf("an executed message was logged at the default level: %v", ok)
	}
}

// One logger option, the runner's, configures the wrappers' records too:
// the record of a call names its message.
func TestOneLoggerOption(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t, idem.WithLogger(newJSONLogger(&buf)))
	handler, err := idemlambda.SQS(e.runner, "notify", idemlambda.KeyFromBodyField("event_id"), func(context.Context, events.SQSMessage) ([]byte, error) {
		return nil, errors.New("declined")
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = handler(e.ctx(t, time500s), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m-1", `{"event_id":"evt-1"}`)}})
	recs := jsonLines(t, buf.String())
	if len(recs) != 1 || recs[0]["message_id"] != "m-1" || recs[0]["verdict"] != "failed_unclassified" {
		t.Errorf("records = %v, want one, naming m-1 and its verdict", recs)
	}
}

// Within one batch, the first record in batch order wins its key, whatever
// the scheduler does: m1 executes, m2 (the same body) replays, m5 (another
// body) is key_reused and reported.
func TestSQSFirstInBatchOrderWinsItsKey(t *testing.T) {
	for run := range 50 {
		e := newEnv(t)
		var mu sync.Mutex
		var ran []string
		handler, err := idemlambda.SQS(e.runner, "notify", idemlambda.KeyFromBodyField("event_id"), func(_ context.Context, m events.SQSMessage) ([]byte, error) {
			mu.Lock()
			ran = append(ran, m.MessageId)
			mu.Unlock()
			return []byte(`"sent"`), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := handler(e.ctx(t, time500s), events.SQSEvent{Records: []events.SQSMessage{
			sqsMsg("m1", `{"event_id":"e","amount":1}`),
			sqsMsg("m2", `{"event_id":"e","amount":1}`),
			sqsMsg("m3", `{"event_id":"x"}`),
			sqsMsg("m4", `{"event_id":"y"}`),
			sqsMsg("m5", `{"event_id":"e","amount":2}`),
		}})
		if slices.Contains(ran, "m5") || !slices.Contains(ran, "m1") {
			t.Fatalf("run %d: executed %v, want m1 (first in batch order) and not m5", run, ran)
		}
		if got := failureIDs(resp); !slices.Equal(got, []string{"m5"}) {
			t.Fatalf("run %d: batchItemFailures = %v, want [m5] (key_reused)", run, got)
		}
	}
}

// What a wrapper decides without the runner, or after it, is a verdict of
// the one vocabulary and reaches the observer: a panic, a record not
// started for lack of time, a FIFO message after its group's failure, a
// missing key; and a Typed replay whose result was omitted or does not
// decode.
func TestWrapperVerdictsReachTheObserver(t *testing.T) {
	var obs observed
	e := newEnv(t, idem.WithObserver(&obs))
	h := &testHandler{clock: e.clock}
	handler, err := idemlambda.SQS(e.runner, "notify", idemlambda.KeyFromBodyField("event_id"), h.handle, idemlambda.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	observe := func(name string, ctx context.Context, msgs ...events.SQSMessage) []string {
		t.Helper()
		_, _ = handler(ctx, events.SQSEvent{Records: msgs})
		got := verdicts(obs.take())
		slices.Sort(got)
		return got
	}
	if got := observe("panic", e.ctx(t, time.Minute), sqsMsg("m-p", body("p", "panic"))); !slices.Equal(got, []string{"panicked"}) {
		t.Errorf("a panic: observed %v, want [panicked]", got)
	}
	if got := observe("no time", e.ctx(t, time.Second), sqsMsg("m-t", body("t", "ok"))); !slices.Equal(got, []string{"not_started"}) {
		t.Errorf("less than the safety margin left: observed %v, want [not_started]", got)
	}
	if got := observe("no key", e.ctx(t, time.Minute), sqsMsg("m-k", `{"id":"k"}`)); !slices.Equal(got, []string{"missing_key"}) {
		t.Errorf("no key: observed %v, want [missing_key]", got)
	}
	got := observe("fifo", e.ctx(t, time.Minute), fifoMsg("f1", "g", body("f1", "transient")), fifoMsg("f2", "g", body("f2", "ok")))
	if !slices.Equal(got, []string{"blocked", "failed_transiently"}) {
		t.Errorf("a FIFO group stopped: observed %v, want [blocked failed_transiently]", got)
	}
}

func TestTypedReplayVerdictsReachTheObserver(t *testing.T) {
	var obs observed
	e := newEnv(t)
	r, err := idem.New(&faultStore{Store: e.store, omit: true}, idem.WithClock(e.clock.Now), idem.WithObserver(&obs))
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string) (string, error) { return "verbatim-key-" + s, nil }
	big, err := idemlambda.Typed(r, key, func(ctx context.Context, s string) (string, error) { return "big result", nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, time.Minute)
	_, _ = big(ctx, "a")
	_, _ = big(ctx, "a")
	if got := verdicts(obs.take()); !slices.Equal(got, []string{"executed", "replay_omitted"}) {
		t.Errorf("an omitted result: observed %v, want [executed replay_omitted]", got)
	}

	r, err = idem.New(e.store, idem.WithClock(e.clock.Now), idem.WithObserver(&obs))
	if err != nil {
		t.Fatal(err)
	}
	asString, err := idemlambda.Typed(r, key, func(ctx context.Context, s string) (string, error) { return "a label", nil })
	if err != nil {
		t.Fatal(err)
	}
	asLabel, err := idemlambda.Typed(r, key, func(ctx context.Context, s string) (label, error) { return label{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, _ = asString(ctx, "b")
	if _, err := asLabel(ctx, "b"); err == nil {
		t.Fatal("a stored string decoded into a struct")
	}
	if got := verdicts(obs.take()); !slices.Equal(got, []string{"executed", "replay_corrupt"}) {
		t.Errorf("a result that does not decode: observed %v, want [executed replay_corrupt]", got)
	}
}

// An HTTP wrapper's call is one record, through the runner's logger, naming
// the request and the status answered; a replay it cannot answer is
// replay_omitted, in the record and the observation alike.
func TestHTTPRecordsAndReplayVerdicts(t *testing.T) {
	var obs observed
	var buf syncBuffer
	e := newEnv(t)
	r, err := idem.New(&faultStore{Store: e.store, omit: true}, idem.WithClock(e.clock.Now),
		idem.WithObserver(&obs), idem.WithLogger(newJSONLogger(&buf)))
	if err != nil {
		t.Fatal(err)
	}
	handle, err := idemlambda.HTTPAPI(r, (&orderAPI{}).handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, 10*time.Second)
	_, _ = handle(ctx, v2Req("POST", "/orders", "k-1", "{}"))
	_, _ = handle(ctx, v2Req("POST", "/orders", "k-1", "{}"))
	_, _ = handle(ctx, v2Req("POST", "/orders", "", "{}"))
	want := []string{"executed", "replay_omitted", "missing_key"}
	if got := verdicts(obs.take()); !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
	recs := jsonLines(t, buf.String())
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprint(rec["verdict"], " ", rec["status"], " ", rec["method"], " ", rec["path"]))
	}
	if want := []string{"executed 201 POST /orders", "replay_omitted 500 POST /orders", "missing_key 400 POST /orders"}; !slices.Equal(got, want) {
		t.Errorf("records %v, want %v", got, want)
	}
}

// A panic that an HTTP or Typed wrapper lets through to the Lambda runtime
// is reported first: one panicked record and observation.
func TestPanicsThroughTheRuntimeAreReported(t *testing.T) {
	var obs observed
	e := newEnv(t, idem.WithObserver(&obs))
	api, err := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		panic("handler bug")
	})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := idemlambda.Typed(e.runner, func(s string) (string, error) { return "verbatim-key-" + s, nil },
		func(context.Context, string) (string, error) { panic("handler bug") })
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(){
		"http":  func() { _, _ = api(e.ctx(t, time.Minute), v2Req("POST", "/orders", "k-p", "{}")) },
		"typed": func() { _, _ = typed(e.ctx(t, time.Minute), "p") },
	} {
		func() {
			defer func() {
				if p := recover(); p != "handler bug" {
					t.Errorf("%s: panic %v, want the handler's, passed on", name, p)
				}
			}()
			call()
		}()
		if got := verdicts(obs.take()); !slices.Equal(got, []string{"panicked"}) {
			t.Errorf("%s: observed %v, want [panicked]", name, got)
		}
	}
}

// Every record a wrapper logs names a verdict of idem.Verdicts(), the list
// the docs are held to, whether the wrapper decided it (a panic, no time, a
// missing key, a FIFO message after its group's failure) or the runner did;
// none logs a name outside it.
func TestLoggedVerdictsAreTheVocabulary(t *testing.T) {
	var out bytes.Buffer
	e := newEnv(t, idem.WithLogger(newJSONLogger(&out)))
	h := &testHandler{clock: e.clock}
	handler, err := idemlambda.SQS(e.runner, "notify", idemlambda.KeyFromBodyField("event_id"), h.handle, idemlambda.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []struct {
		left time.Duration
		msgs []events.SQSMessage
	}{
		{time.Minute, []events.SQSMessage{sqsMsg("m-p", body("p", "panic")), sqsMsg("m-k", `{"id":"k"}`), sqsMsg("m-ok", body("ok", "ok"))}},
		{time.Minute, []events.SQSMessage{sqsMsg("m-ok2", body("ok", "ok")), sqsMsg("m-x", body("x", "permanent"))}},
		{time.Second, []events.SQSMessage{sqsMsg("m-t", body("t", "ok"))}},
		{time.Minute, []events.SQSMessage{fifoMsg("f1", "g", body("f1", "transient")), fifoMsg("f2", "g", body("f2", "ok"))}},
	} {
		_, _ = handler(e.ctx(t, batch.left), events.SQSEvent{Records: batch.msgs})
	}
	known := map[string]bool{}
	for _, v := range idem.Verdicts() {
		known[v.String()] = true
	}
	seen := map[string]bool{}
	for _, rec := range jsonLines(t, out.String()) {
		v, ok := rec["verdict"].(string)
		if !ok {
			continue
		}
		if !known[v] {
			t.Errorf("logged verdict %q is not one of idem.Verdicts(): %v", v, rec)
		}
		seen[v] = true
	}
	for _, want := range []string{"panicked", "missing_key", "not_started", "blocked", "failed_transiently", "failed_permanently", "executed", "replayed"} {
		if !seen[want] {
			t.Errorf("no record logged the verdict %s; logged %v:\n%s", want, seen, out.String())
		}
	}
}
