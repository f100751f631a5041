package idemlambda

import (
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
)

// fingerprintOf is a batch wrapper's fingerprint of payload, with no
// selection.
func fingerprintOf(t *testing.T, payload []byte) string {
	t.Helper()
	fp, err := bodyFingerprint(core.Selection{})(payload)
	if err != nil {
		t.Fatalf("payload %s does not fingerprint: %v", payload, err)
	}
	return fp
}

func TestKinesisPayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b []byte
		same bool
	}{
		{"JSON with keys reordered and spaces", []byte(`{"a":1,"b":[true,null]}`), []byte(` { "b" : [ true , null ] , "a" : 1 } `), true},
		{"JSON with another value", []byte(`{"a":1}`), []byte(`{"a":2}`), false},
		{"text", []byte("hello"), []byte("hello"), true},
		{"text and the same text as a JSON string", []byte("hello"), []byte(`"hello"`), true},
		{"two binary records", []byte{0xff, 0x00}, []byte{0xfe, 0x00}, false},
		{"binary and the text invalid UTF-8 would become", []byte{0xff}, []byte("\ufffd"), false},
		{"binary and the same binary", []byte{0xff, 0x01}, []byte{0xff, 0x01}, true},
		{"empty and empty", nil, []byte{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fingerprintOf(t, kinesisPayload(tc.a)), fingerprintOf(t, kinesisPayload(tc.b))
			if (a == b) != tc.same {
				t.Errorf("fingerprints %s and %s: same = %v, want %v", a, b, a == b, tc.same)
			}
		})
	}
}

func TestDynamoDBPayload(t *testing.T) {
	t.Parallel()
	s, n := events.NewStringAttribute, events.NewNumberAttribute
	rec := func(edit func(*events.DynamoDBEventRecord)) events.DynamoDBEventRecord {
		r := events.DynamoDBEventRecord{EventName: "INSERT", EventID: "e1", Change: events.DynamoDBStreamRecord{
			SequenceNumber: "100",
			Keys:           map[string]events.DynamoDBAttributeValue{"id": s("o1")},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"id":   s("o1"),
				"tags": events.NewStringSetAttribute([]string{"b", "a"}),
				"nums": events.NewNumberSetAttribute([]string{"2", "10"}),
				"bin":  events.NewBinarySetAttribute([][]byte{{2}, {1}}),
				"l":    events.NewListAttribute([]events.DynamoDBAttributeValue{n("1"), events.NewNullAttribute(), events.NewBooleanAttribute(false)}),
				"m":    events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"x": events.NewBinaryAttribute([]byte("raw"))}),
			},
		}}
		edit(&r)
		return r
	}
	base, err := dynamoDBPayload(rec(func(*events.DynamoDBEventRecord) {}))
	if err != nil {
		t.Fatal(err)
	}
	baseFP := fingerprintOf(t, base)
	tests := []struct {
		name string
		edit func(*events.DynamoDBEventRecord)
		same bool
	}{
		{"another event id, sequence number and size", func(r *events.DynamoDBEventRecord) {
			r.EventID, r.Change.SequenceNumber, r.Change.SizeBytes = "e2", "200", 99
		}, true},
		{"set members in another order", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["tags"] = events.NewStringSetAttribute([]string{"a", "b"})
			r.Change.NewImage["nums"] = events.NewNumberSetAttribute([]string{"10", "2"})
			r.Change.NewImage["bin"] = events.NewBinarySetAttribute([][]byte{{1}, {2}})
		}, true},
		{"list elements in another order", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["l"] = events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewNullAttribute(), n("1"), events.NewBooleanAttribute(false)})
		}, false},
		{"another event name", func(r *events.DynamoDBEventRecord) { r.EventName = "MODIFY" }, false},
		{"a string where a number was", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["l"] = events.NewListAttribute([]events.DynamoDBAttributeValue{s("1"), events.NewNullAttribute(), events.NewBooleanAttribute(false)})
		}, false},
		{"an old image added", func(r *events.DynamoDBEventRecord) {
			r.Change.OldImage = map[string]events.DynamoDBAttributeValue{"id": s("o1")}
		}, false},
		{"the new image moved to the old image", func(r *events.DynamoDBEventRecord) {
			r.Change.OldImage, r.Change.NewImage = r.Change.NewImage, nil
		}, false},
		{"another binary value", func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["m"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"x": events.NewBinaryAttribute([]byte("rax"))})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := dynamoDBPayload(rec(tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			if fp := fingerprintOf(t, p); (fp == baseFP) != tc.same {
				t.Errorf("payload %s\nbase    %s\nsame = %v, want %v", p, base, fp == baseFP, tc.same)
			}
		})
	}
	t.Run("a malformed value is an invalid payload", func(t *testing.T) {
		_, err := dynamoDBPayload(rec(func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["m"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"x": {}})
		}))
		if !errors.Is(err, core.ErrInvalidPayload) || !errors.Is(err, errBadAttribute) {
			t.Errorf("err = %v, want ErrInvalidPayload and errBadAttribute", err)
		}
	})
}
