package idemlambda_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

func TestKeyFromAll(t *testing.T) {
	t.Parallel()
	attr := func(m events.SQSMessage, name, v string) events.SQSMessage {
		m.MessageAttributes = map[string]events.SQSMessageAttribute{name: {DataType: "String", StringValue: &v}}
		return m
	}
	src := idemlambda.KeyFromAll(idemlambda.KeyFromAttribute("tenant"), idemlambda.KeyFromBodyField("id"))
	id := func(t *testing.T, m events.SQSMessage) string {
		t.Helper()
		got, err := src.EventID(m)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a := id(t, attr(sqsMsg("m-1", `{"id":"7"}`), "tenant", "ab"))
	tests := []struct {
		name string
		msg  events.SQSMessage
		same bool
	}{
		{"same parts, another message", attr(sqsMsg("m-2", `{"id":"7","x":1}`), "tenant", "ab"), true},
		{"parts split elsewhere", attr(sqsMsg("m-3", `{"id":"b7"}`), "tenant", "a"), false},
		{"another tenant", attr(sqsMsg("m-4", `{"id":"7"}`), "tenant", "abc"), false},
		{"the number with the string's text", attr(sqsMsg("m-5", `{"id":7}`), "tenant", "ab"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := id(t, tc.msg); (got == a) != tc.same {
				t.Errorf("identity %s vs %s: same = %v want %v", got, a, got == a, tc.same)
			}
		})
	}
	if _, err := src.EventID(sqsMsg("m-6", `{"id":"7"}`)); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("a missing part: err = %v, want ErrMissingKey", err)
	}
	if got := src.String(); got != "all of (message attribute tenant, body field id)" {
		t.Errorf("String() = %q", got)
	}
	long := strings.Repeat("x", core.MaxSourceLen)
	if _, err := src.EventID(attr(sqsMsg("m-7", `{"id":"`+long+`"}`), "tenant", "ab")); !errors.Is(err, idemlambda.ErrMissingKey) || !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("parts over core.MaxSourceLen: err = %v", err)
	}
}

func TestKeyFromFunc(t *testing.T) {
	t.Parallel()
	src := idemlambda.KeyFromFunc("order ref", func(m events.SQSMessage) (string, error) {
		ref, _, ok := strings.Cut(m.Body, "|")
		if !ok {
			return "", errors.New("no order ref")
		}
		return ref, nil
	})
	for _, c := range []struct {
		body, want string
		err        bool
	}{{"ord-1|payload", "ord-1", false}, {"no separator", "", true}, {"|empty ref", "", true}} {
		got, err := src.EventID(sqsMsg("m", c.body))
		if got != c.want || (err != nil) != c.err || (err != nil && !errors.Is(err, idemlambda.ErrMissingKey)) {
			t.Errorf("%q: %q, %v; want %q (error %v, wrapping ErrMissingKey)", c.body, got, err, c.want, c.err)
		}
	}
	if s := idemlambda.KeyFromFunc[events.SQSMessage]("", func(events.SQSMessage) (string, error) { return "x", nil }); s.String() != "key function" {
		t.Errorf("unnamed: String() = %q", s)
	}
	e := newEnv(t)
	h := (&orderHandler{}).handle
	for name, s := range map[string]idemlambda.KeySource{
		"nil function":       idemlambda.KeyFromFunc[events.SQSMessage]("x", nil),
		"no sources":         idemlambda.KeyFromAll[events.SQSMessage](),
		"a zero source":      idemlambda.KeyFromAll(idemlambda.KeyFromMessageID(), idemlambda.KeySource{}),
		"the zero KeySource": {},
	} {
		if _, err := idemlambda.SQS(e.runner, "a", s, h); err == nil || !strings.Contains(err.Error(), "KeyFromFunc") {
			t.Errorf("%s: err = %v; want the zero source refused, naming the constructors", name, err)
		}
	}
}

// Every batch wrapper takes a key function and a composite key: a Kinesis
// stream keyed by tenant and event id, a DynamoDB stream keyed by two
// attributes of the new image.
func TestStreamKeyFuncAndComposite(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	h := &streamHandler{clock: e.clock}
	tenant := idemlambda.KeyFromFunc("tenant prefix of the partition key", func(r events.KinesisEventRecord) (string, error) {
		t, _, ok := strings.Cut(r.Kinesis.PartitionKey, "/")
		if !ok {
			return "", fmt.Errorf("partition key %q has no tenant", r.Kinesis.PartitionKey)
		}
		return t, nil
	})
	kin, err := idemlambda.Kinesis(e.runner, "audit", idemlambda.KeyFromAll(tenant, idemlambda.KinesisKeyFromDataField("event_id")), h.kinesis)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(n int, tenant, id string) events.KinesisEventRecord {
		r := kinRec(0, n, body(id, "ok"))
		r.Kinesis.PartitionKey = tenant + "/" + id
		return r
	}
	for i, b := range []struct {
		recs []events.KinesisEventRecord
		want []idem.Verdict
	}{
		{[]events.KinesisEventRecord{rec(1, "acme", "e-1"), rec(2, "globex", "e-1")}, []idem.Verdict{idem.Executed, idem.Executed}},
		{[]events.KinesisEventRecord{rec(3, "acme", "e-1")}, []idem.Verdict{idem.Replayed}},
	} {
		resp, err := kin(e.ctx(t, time.Minute), events.KinesisEvent{Records: b.recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch %d: %+v, %v", i, resp, err)
		}
		if got := v.take(); !slices.Equal(got, b.want) {
			t.Errorf("batch %d: verdicts %v want %v", i, got, b.want)
		}
	}
	if got := h.runs.get("e-1"); got != 2 {
		t.Errorf("runs of e-1 = %d want 2 (one per tenant)", got)
	}

	ddb, err := idemlambda.DynamoDBStream(e.runner, "audit",
		idemlambda.KeyFromAll(idemlambda.DynamoDBKeyFromNewImage("id"), idemlambda.DynamoDBKeyFromNewImage("amount_cents")), h.dynamodb,
		idemlambda.WithFingerprintSelection(core.SelectFields("NewImage.id")))
	if err != nil {
		t.Fatal(err)
	}
	mod := ddbRec(5, "MODIFY", "o-8", "ok")
	for i, r := range []events.DynamoDBEventRecord{d(4, "o-8", "ok"), mod} {
		if _, err := ddb(e.ctx(t, time.Minute), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{r}}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	// The MODIFY has another eventName and an OldImage, outside the
	// selection: the same operation, replayed.
	if got := v.take(); !slices.Equal(got, []idem.Verdict{idem.Executed, idem.Replayed}) {
		t.Errorf("DynamoDB verdicts = %v", got)
	}
}
