package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	idemlambda "github.com/idemgo/idem/lambda"
)

const (
	stdARN  = "arn:aws:sqs:eu-west-1:123456789012:orders"
	fifoARN = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
)

// sqsMsg returns a realistic SQS record of a standard queue.
func sqsMsg(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId:     id,
		ReceiptHandle: "AQEB" + id + "==",
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    "1893553445000",
			"SenderId":                         "AIDAEXAMPLE",
			"ApproximateFirstReceiveTimestamp": "1893553445001",
		},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSourceARN:    stdARN,
		EventSource:       "aws:sqs",
		AWSRegion:         "eu-west-1",
	}
}

// fifoMsg returns a record of a FIFO queue in message group group.
func fifoMsg(id, group, body string) events.SQSMessage {
	m := sqsMsg(id, body)
	m.EventSourceARN = fifoARN
	m.Attributes["MessageGroupId"] = group
	m.Attributes["MessageDeduplicationId"] = "dedup-" + id
	m.Attributes["SequenceNumber"] = "1000"
	return m
}

// body returns a test message body: event id and what the handler does.
func body(eventID, do string) string {
	return fmt.Sprintf(`{"event_id":%q,"do":%q}`, eventID, do)
}

// testHandler runs the behaviour named in the body's "do" field and counts
// executions per event id; it records the execution order.
type testHandler struct {
	clock *fakeclock.Clock
	runs  counter
	mu    sync.Mutex
	order []string
}

func (h *testHandler) handle(ctx context.Context, m events.SQSMessage) ([]byte, error) {
	var b struct {
		EventID string `json:"event_id"`
		Do      string `json:"do"`
	}
	_ = json.Unmarshal([]byte(m.Body), &b)
	n := h.runs.inc(b.EventID)
	h.mu.Lock()
	h.order = append(h.order, m.MessageId)
	h.mu.Unlock()
	switch b.Do {
	case "transient":
		return nil, core.MarkTransient(errors.New("downstream unavailable"))
	case "transient_once":
		if n == 1 {
			return nil, core.MarkTransient(errors.New("downstream unavailable"))
		}
	case "permanent":
		return nil, core.MarkPermanent(errors.New("order does not exist"))
	case "error":
		return nil, errors.New("warehouse said no") // nobody classified it
	case "panic":
		panic("handler bug")
	case "advance_9s":
		h.clock.Advance(9 * time.Second)
	case "linger":
		// Stay in the handler a moment, so that a duplicate running
		// concurrently would find the key in progress. Correct code
		// serializes duplicates and passes whatever the timing.
		time.Sleep(50 * time.Millisecond)
	}
	return []byte(`"done ` + b.EventID + `"`), nil
}

func failureIDs(r events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestSQS(t *testing.T) {
	type delivery struct {
		msgs []events.SQSMessage
		want []string // message ids reported as failures
	}
	tests := []struct {
		name    string
		runOpts []idem.Option
		opts    []idemlambda.BatchOption
		prepare func(t *testing.T, e *env)
		batches []delivery
		runs    map[string]int // executions per event id after all batches
		timeout time.Duration  // the invocation's time left (default a minute)
	}{
		{
			name: "all succeed",
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok")), sqsMsg("m2", body("e2", "ok")), sqsMsg("m3", body("e3", "ok"))},
				want: []string{},
			}},
			runs: map[string]int{"e1": 1, "e2": 1, "e3": 1},
		},
		{
			name: "duplicate within a batch replays instead of being refused",
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "linger")), sqsMsg("m2", body("e1", "linger")), sqsMsg("m3", body("e1", "linger"))},
				want: []string{},
			}},
			runs: map[string]int{"e1": 1},
		},
		{
			name: "duplicate across batches replays",
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m9", body("e1", "ok")), sqsMsg("m10", body("e2", "ok"))}, want: []string{}},
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name:    "transient failure is reported, then succeeds on redelivery",
			runOpts: []idem.Option{idem.WithRetry(1, 0, 0)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient_once")), sqsMsg("m2", body("e2", "ok"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient_once"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient_once"))}, want: []string{}},
			},
			runs: map[string]int{"e1": 2, "e2": 1},
		},
		{
			name: "transient failure retried in-process succeeds within the invocation",
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient_once"))}, want: []string{}},
			},
			runs: map[string]int{"e1": 2},
		},
		{
			name:    "retries exhausted is reported, replayed without running",
			runOpts: []idem.Option{idem.WithRetry(1, 0, 0), idem.WithMaxAttempts(2)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient"))}, want: []string{"m1"}},
			},
			runs: map[string]int{"e1": 2},
		},
		{
			name:    "retries exhausted is acknowledged when named",
			runOpts: []idem.Option{idem.WithRetry(1, 0, 0), idem.WithMaxAttempts(2)},
			opts:    []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.RetriesExhausted)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "transient"))}, want: []string{}},
			},
			runs: map[string]int{"e1": 2},
		},
		{
			name: "permanent failure is reported and replayed without running",
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent")), sqsMsg("m2", body("e2", "ok"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent"))}, want: []string{"m1"}},
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "permanent failure is reported with the deprecated option too",
			opts: []idemlambda.BatchOption{idemlambda.WithPermanentFailuresToDLQ()}, // deprecated: the default
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent")), sqsMsg("m2", body("e2", "ok"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent"))}, want: []string{"m1"}},
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "permanent failure is acknowledged when named, new and replayed",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.FailedPermanently, idem.ReplayedFailure)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent")), sqsMsg("m2", body("e2", "ok"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent"))}, want: []string{}},
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "only the named verdicts are acknowledged",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.FailedPermanently)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "permanent"))}, want: []string{"m1"}}, // replayed_failure
			},
			runs: map[string]int{"e1": 1},
		},
		{
			name: "missing key field is reported, never run",
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", `{"do":"ok"}`), sqsMsg("m2", `not json`), sqsMsg("m3", `{"event_id":null}`), sqsMsg("m4", body("e4", "ok"))},
				want: []string{"m1", "m2", "m3"},
			}},
			runs: map[string]int{"": 0, "e4": 1},
		},
		{
			name: "missing key field is acknowledged when named",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.MissingKey)},
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", `{"do":"ok"}`), sqsMsg("m2", `not json`), sqsMsg("m3", `{"event_id":""}`), sqsMsg("m4", body("e4", "ok"))},
				want: []string{},
			}},
			runs: map[string]int{"": 0, "e4": 1},
		},
		{
			name: "key reused with another body is reported",
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m2", `{"event_id":"e1","do":"ok","amount":2}`)}, want: []string{"m2"}},
			},
			runs: map[string]int{"e1": 1},
		},
		{
			name: "key reused with another body is acknowledged when named",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.KeyReused)},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok"))}, want: []string{}},
				{msgs: []events.SQSMessage{sqsMsg("m2", `{"event_id":"e1","do":"ok","amount":2}`)}, want: []string{}},
			},
			runs: map[string]int{"e1": 1},
		},
		{
			name: "in-progress duplicate is reported, then taken over after the lease",
			prepare: func(t *testing.T, e *env) {
				key, err := idemlambda.EventKey("e1", "ledger")
				if err != nil {
					t.Fatal(err)
				}
				e.hold(t, key, []byte(body("e1", "ok")), e.clock.Now().Add(5*time.Second))
			},
			batches: []delivery{
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok")), sqsMsg("m2", body("e2", "ok"))}, want: []string{"m1"}},
				{msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "ok"))}, want: []string{}}, // after the clock moved past the lease (below)
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "messages not reached before the deadline are reported unstarted",
			opts: []idemlambda.BatchOption{idemlambda.WithConcurrency(1), idemlambda.WithSafetyMargin(2 * time.Second)},
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "advance_9s")), sqsMsg("m2", body("e2", "ok")), sqsMsg("m3", body("e3", "ok"))},
				want: []string{"m2", "m3"},
			}},
			runs:    map[string]int{"e1": 1, "e2": 0, "e3": 0},
			timeout: 10 * time.Second,
		},
		{
			name: "panic is recovered and reported",
			batches: []delivery{{
				msgs: []events.SQSMessage{sqsMsg("m1", body("e1", "panic")), sqsMsg("m2", body("e2", "ok"))},
				want: []string{"m1"},
			}},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "FIFO group stops at its first failure, other groups go on",
			batches: []delivery{{
				msgs: []events.SQSMessage{
					fifoMsg("a1", "A", body("a1", "ok")), fifoMsg("b1", "B", body("b1", "ok")),
					fifoMsg("a2", "A", body("a2", "permanent")), fifoMsg("b2", "B", body("b2", "ok")),
					fifoMsg("a3", "A", body("a3", "ok")), fifoMsg("a4", "A", body("a4", "ok")),
				},
				want: []string{"a2", "a3", "a4"},
			}},
			runs: map[string]int{"a1": 1, "a2": 1, "a3": 0, "a4": 0, "b1": 1, "b2": 1},
		},
		{
			name:    "FIFO group stops at an in-progress duplicate and a transient failure",
			runOpts: []idem.Option{idem.WithRetry(1, 0, 0)},
			prepare: func(t *testing.T, e *env) {
				key, _ := idemlambda.EventKey("a1", "ledger")
				e.hold(t, key, []byte(body("a1", "ok")), e.clock.Now().Add(time.Minute))
			},
			batches: []delivery{{
				msgs: []events.SQSMessage{
					fifoMsg("a1", "A", body("a1", "ok")), fifoMsg("a2", "A", body("a2", "ok")),
					fifoMsg("b1", "B", body("b1", "transient")), fifoMsg("b2", "B", body("b2", "ok")),
					fifoMsg("c1", "C", body("c1", "ok")),
				},
				want: []string{"a1", "a2", "b1", "b2"},
			}},
			runs: map[string]int{"a1": 0, "a2": 0, "b1": 1, "b2": 0, "c1": 1},
		},
		{
			name: "FIFO acknowledged permanent failure does not stop the group",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.FailedPermanently)},
			batches: []delivery{{
				msgs: []events.SQSMessage{fifoMsg("a1", "A", body("a1", "permanent")), fifoMsg("a2", "A", body("a2", "ok"))},
				want: []string{},
			}},
			runs: map[string]int{"a1": 1, "a2": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.runOpts...)
			h := &testHandler{clock: e.clock}
			handle, err := idemlambda.SQS(e.runner, "ledger", idemlambda.KeyFromBodyField("event_id"), h.handle,
				append([]idemlambda.BatchOption{idemlambda.WithClock(e.clock.Now)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(t, e)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			for i, b := range tc.batches {
				resp, err := handle(e.ctx(t, timeout), events.SQSEvent{Records: b.msgs})
				if err != nil {
					t.Fatalf("batch %d: err = %v", i, err)
				}
				if got := failureIDs(resp); !slices.Equal(got, b.want) {
					t.Errorf("batch %d: failures = %v want %v", i, got, b.want)
				}
				e.clock.Advance(10 * time.Second) // past any lease of the fixtures
			}
			for id, want := range tc.runs {
				if got := h.runs.get(id); got != want {
					t.Errorf("executions of %q = %d want %d", id, got, want)
				}
			}
		})
	}
}

func TestSQSFIFOKeepsOrderWithinGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := &testHandler{clock: e.clock}
	handle, err := idemlambda.SQS(e.runner, "ledger", idemlambda.KeyFromDeduplicationID(), h.handle)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for i := range 30 {
		g := string(rune('A' + i%3))
		msgs = append(msgs, fifoMsg(fmt.Sprintf("%s%02d", g, i), g, body(fmt.Sprint(i), "ok")))
	}
	resp, err := handle(e.ctx(t, time.Minute), events.SQSEvent{Records: msgs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("resp = %+v, %v; want no failures", resp, err)
	}
	for _, g := range []string{"A", "B", "C"} {
		var got []string
		for _, id := range h.order {
			if strings.HasPrefix(id, g) {
				got = append(got, id)
			}
		}
		if !slices.IsSorted(got) || len(got) != 10 {
			t.Errorf("group %s ran in order %v, want 10 in message order", g, got)
		}
	}
}

func TestSQSConcurrencyBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const limit = 3
	var running, peak atomic.Int32
	full := make(chan struct{})
	var once sync.Once
	handler := func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == limit {
			once.Do(func() { close(full) })
		}
		select { // the first messages wait until the bound is reached
		case <-full:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, nil
	}
	handle, err := idemlambda.SQS(e.runner, "ledger", idemlambda.KeyFromMessageID(), handler, idemlambda.WithConcurrency(limit))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for i := range 20 {
		msgs = append(msgs, sqsMsg(fmt.Sprintf("m%02d", i), "{}"))
	}
	// A real-time guard so that a broken bound fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("resp = %+v, %v; want no failures", resp, err)
	}
	if got := peak.Load(); got != limit {
		t.Errorf("peak concurrency = %d want %d", got, limit)
	}
}

func TestSQSKeySources(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	m := sqsMsg("msg-1", `{"event_id":"e-7","detail":{"order":{"id":42}},"flag":true}`)
	m.MessageAttributes["EventId"] = events.SQSMessageAttribute{DataType: "String", StringValue: str("attr-9")}
	m.MessageAttributes["Blob"] = events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{1}}
	f := fifoMsg("msg-2", "g", "plain text")
	tests := []struct {
		name    string
		source  idemlambda.KeySource
		msg     events.SQSMessage
		want    string
		wantErr bool
	}{
		{"body field", idemlambda.KeyFromBodyField("event_id"), m, "e-7", false},
		{"dotted path to a number", idemlambda.KeyFromBodyField("detail.order.id"), m, "42", false},
		{"missing field", idemlambda.KeyFromBodyField("detail.customer"), m, "", true},
		{"path through a non-object", idemlambda.KeyFromBodyField("event_id.x"), m, "", true},
		{"boolean field", idemlambda.KeyFromBodyField("flag"), m, "", true},
		{"object field", idemlambda.KeyFromBodyField("detail"), m, "", true},
		{"body not JSON", idemlambda.KeyFromBodyField("event_id"), f, "", true},
		{"empty path", idemlambda.KeyFromBodyField(""), m, "", true},
		{"attribute", idemlambda.KeyFromAttribute("EventId"), m, "attr-9", false},
		{"missing attribute", idemlambda.KeyFromAttribute("Nope"), m, "", true},
		{"binary attribute", idemlambda.KeyFromAttribute("Blob"), m, "", true},
		{"deduplication id", idemlambda.KeyFromDeduplicationID(), f, "dedup-msg-2", false},
		{"deduplication id on a standard queue", idemlambda.KeyFromDeduplicationID(), m, "", true},
		{"message id", idemlambda.KeyFromMessageID(), m, "msg-1", false},
		{"empty message id", idemlambda.KeyFromMessageID(), events.SQSMessage{}, "", true},
		{"zero source", idemlambda.KeySource{}, m, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.source.EventID(tc.msg)
			if tc.wantErr {
				if !errors.Is(err, idemlambda.ErrMissingKey) {
					t.Fatalf("EventID = %q, %v; want an error wrapping ErrMissingKey", got, err)
				}
				if _, err := idemlambda.SQSKey(tc.source, "ledger", tc.msg); err == nil {
					t.Fatalf("SQSKey succeeded for a message without a key")
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("EventID = %q, %v; want %q", got, err, tc.want)
			}
			key, err := idemlambda.SQSKey(tc.source, "ledger", tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := idemlambda.EventKey(tc.want, "ledger"); key != want {
				t.Fatalf("SQSKey = %q want EventKey(%q, ledger) = %q", key, tc.want, want)
			}
		})
	}
}

func TestEventKey(t *testing.T) {
	t.Parallel()
	a, err := idemlambda.EventKey("evt-1", "charge")
	if err != nil {
		t.Fatal(err)
	}
	if err := core.ValidateKey(a); err != nil {
		t.Fatalf("EventKey gave an invalid key %q: %v", a, err)
	}
	if strings.Contains(a, "evt-1") {
		t.Errorf("EventKey %q holds the event id verbatim", a)
	}
	for _, other := range [][2]string{{"evt-2", "charge"}, {"evt-1", "refund"}, {"evt-1charge", "x"}} {
		b, err := idemlambda.EventKey(other[0], other[1])
		if err != nil || b == a {
			t.Errorf("EventKey%v = %q, %v; want a key other than %q", other, b, err, a)
		}
	}
	if again, _ := idemlambda.EventKey("evt-1", "charge"); again != a {
		t.Errorf("EventKey is not deterministic: %q then %q", a, again)
	}
	if _, err := idemlambda.EventKey("", "charge"); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("empty event id: err = %v want ErrMissingKey", err)
	}
	if _, err := idemlambda.EventKey("e", ""); !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("empty action: err = %v want ErrInvalidKey", err)
	}
}

func TestSQSLogs(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	e := newEnv(t, idem.WithRetry(1, 0, 0), idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	h := &testHandler{clock: e.clock}
	handle, err := idemlambda.SQS(e.runner, "ledger", idemlambda.KeyFromBodyField("event_id"), h.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, time.Minute)
	if _, err := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", body("secret-event", "ok"))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", body("secret-event", "ok")), sqsMsg("m2", `{}`)}}); err != nil {
		t.Fatal(err)
	}
	key, _ := idemlambda.EventKey("secret-event", "ledger")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		got = append(got, rec)
	}
	if len(got) != 3 {
		t.Fatalf("got %d log records, want 3: %s", len(got), buf.String())
	}
	want := []struct {
		decision string
		replayed bool
		keyHash  string
	}{{"executed", false, idem.HashKey(key)}, {"replayed", true, idem.HashKey(key)}, {"missing_key", false, ""}}
	slices.SortFunc(got[1:], func(a, b map[string]any) int {
		return strings.Compare(a["message_id"].(string), b["message_id"].(string))
	})
	for i, w := range want {
		r := got[i]
		if r["verdict"] != w.decision || r["replayed"] != w.replayed || (w.keyHash != "" && r["key_hash"] != w.keyHash) {
			t.Errorf("record %d = %v; want verdict %s replayed %v key_hash %q", i, r, w.decision, w.replayed, w.keyHash)
		}
		// The stored key, a hash of the event id and the action, is the record's
		// handle: `idem inspect --key` reads the record with it.
		if w.keyHash != "" && r["key"] != key {
			t.Errorf("record %d = %v; want key %q", i, r, key)
		}
	}
	if strings.Contains(buf.String(), "secret-event") {
		t.Errorf("logs hold the event id verbatim: %s", buf.String())
	}
}

func TestSQSOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }
	src := idemlambda.KeyFromMessageID()
	tests := []struct {
		name string
		make func() error
	}{
		{"nil runner", func() error { _, err := idemlambda.SQS(nil, "a", src, h); return err }},
		{"nil handler", func() error { _, err := idemlambda.SQS(e.runner, "a", src, nil); return err }},
		{"empty action", func() error { _, err := idemlambda.SQS(e.runner, "", src, h); return err }},
		{"action with a control character", func() error { _, err := idemlambda.SQS(e.runner, "a\n", src, h); return err }},
		{"zero key source", func() error { _, err := idemlambda.SQS(e.runner, "a", idemlambda.KeySource{}, h); return err }},
		{"zero concurrency", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithConcurrency(0))
			return err
		}},
		{"negative safety margin", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithSafetyMargin(-time.Second))
			return err
		}},
		{"nil clock", func() error { _, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithClock(nil)); return err }},
		{"acknowledge nothing", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithAcknowledged())
			return err
		}},
		{"acknowledge a transient failure", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithAcknowledged(idem.FailedTransiently))
			return err
		}},
		{"acknowledge a key in progress", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithAcknowledged(idem.KeyReused, idem.InProgress))
			return err
		}},
		{"acknowledge a panic", func() error {
			_, err := idemlambda.SQS(e.runner, "a", src, h, idemlambda.WithAcknowledged(idem.Panicked))
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(); err == nil {
				t.Fatal("constructor succeeded, want an error")
			}
		})
	}
}

func TestIsFIFO(t *testing.T) {
	t.Parallel()
	m := sqsMsg("m", "{}")
	g := sqsMsg("g", "{}")
	g.Attributes["MessageGroupId"] = "grp"
	tests := []struct {
		name string
		ev   events.SQSEvent
		want bool
	}{
		{"standard", events.SQSEvent{Records: []events.SQSMessage{m}}, false},
		{"fifo ARN", events.SQSEvent{Records: []events.SQSMessage{fifoMsg("f", "g", "{}")}}, true},
		{"group attribute only: a fair queue", events.SQSEvent{Records: []events.SQSMessage{g}}, false},
		{"empty", events.SQSEvent{}, false},
	}
	for _, tc := range tests {
		if got := idemlambda.IsFIFO(tc.ev); got != tc.want {
			t.Errorf("%s: IsFIFO = %v want %v", tc.name, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A fair queue is a standard queue whose messages carry a MessageGroupId
// (the tenant): its batch runs concurrently, not in order per group, and a
// failure blocks nothing after it.
func TestSQSFairQueueRunsConcurrently(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 4
	var arrived atomic.Int32
	all := make(chan struct{})
	handler := func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		if arrived.Add(1) == n {
			close(all)
		}
		select { // each message waits until every one of the batch runs at once
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if m.MessageId == "t1-1" {
			return nil, errors.New("warehouse said no")
		}
		return []byte(`"ok"`), nil
	}
	handle, err := idemlambda.SQS(e.runner, "ledger", idemlambda.KeyFromMessageID(), handler)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for i := range n {
		m := sqsMsg(fmt.Sprintf("t1-%d", i+1), fmt.Sprintf(`{"n":%d}`, i))
		m.Attributes["MessageGroupId"] = "tenant-1" // one tenant: a FIFO queue would run them in order
		msgs = append(msgs, m)
	}
	// A wall-clock bound only so that a wrapper that runs them in order
	// fails instead of hanging; correct code never waits for it.
	ctx, cancel := context.WithTimeout(e.ctx(t, time500s), 10*time.Second)
	defer cancel()
	resp, err := handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil || arrived.Load() != n {
		t.Fatalf("resp = %+v, %v, %d messages ran; want all %d at once", resp, err, arrived.Load(), n)
	}
	if got := failureIDs(resp); !slices.Equal(got, []string{"t1-1"}) {
		t.Errorf("batchItemFailures = %v, want [t1-1] alone: nothing after it is blocked", got)
	}
}
