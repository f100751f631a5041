package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// fakeAPI answers PutItem and GetItem from scripted functions and counts the
// calls, and DescribeTable with the default table. The unit tests use it;
// they need no server.
type fakeAPI struct {
	ddbstore.API // the calls a test does not answer (nil: a call panics)
	mu           sync.Mutex
	puts         []*dynamodb.PutItemInput // guarded by mu
	gets         int                      // guarded by mu
	put          func(n int, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	get          func(n int, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
}

func (f *fakeAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	f.puts = append(f.puts, in)
	n := len(f.puts)
	f.mu.Unlock()
	if f.put == nil {
		return &dynamodb.PutItemOutput{}, nil
	}
	return f.put(n, in)
}

func (f *fakeAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	f.gets++
	n := f.gets
	f.mu.Unlock()
	if !aws.ToBool(in.ConsistentRead) {
		return nil, errors.New("fake: GetItem without ConsistentRead")
	}
	if f.get == nil {
		return &dynamodb.GetItemOutput{}, nil
	}
	return f.get(n, in)
}

// DescribeTable describes the default table (a string partition key pk),
// as a store asks after a ValidationException.
func (f *fakeAPI) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: types.TableStatusActive,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(ddbstore.DefaultKeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(ddbstore.DefaultKeyAttribute), KeyType: types.KeyTypeHash}},
	}}, nil
}

func (f *fakeAPI) counts() (puts, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.puts), f.gets
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// itemOf returns the item the store writes for rec, by completing (or
// reserving) it through a fake that captures the put.
func itemOf(t *testing.T, rec core.Record) map[string]types.AttributeValue {
	t.Helper()
	f := &fakeAPI{}
	s, err := ddbstore.New(f, "idem-unit")
	if err != nil {
		t.Fatal(err)
	}
	switch rec.Status {
	case core.StatusInProgress:
		err = s.Reserve(context.Background(), rec, nil, t0)
	default:
		_, err = s.Complete(context.Background(), rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.puts[0].Item
}

func ccf(item map[string]types.AttributeValue) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem",
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}},
			Err:      &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: item},
		}}}
}

func newUnitStore(t *testing.T, f *fakeAPI) *ddbstore.Store {
	t.Helper()
	s, err := ddbstore.New(f, "idem-unit")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func reservation(token string) core.Record {
	return core.Reserve("unit:key:1", fp, token, nil, t0, t0.Add(time.Minute), time.Hour)
}

func succeeded(token string, result []byte) core.Record {
	return core.Succeed(reservation(token), result, t0.Add(time.Second), time.Hour)
}

func TestReserveConflictFromAllOld(t *testing.T) {
	winner := succeeded("tok-winner", []byte(`{"ok":1}`))
	item := itemOf(t, winner)
	f := &fakeAPI{put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(item) }}
	s := newUnitStore(t, f)
	err := s.Reserve(context.Background(), reservation("tok-loser"), nil, t0.Add(2*time.Second))
	var ce *idem.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Reserve = %v, want *idem.ConflictError", err)
	}
	got := ce.Existing
	if got.LeaseToken != "tok-winner" || got.Status != core.StatusSucceeded || string(got.Result) != `{"ok":1}` ||
		!got.ExpiresAt.Equal(winner.ExpiresAt) || got.Attempts != 1 || got.Fingerprint != fp {
		t.Errorf("Existing = %v result %q, want %v", got, got.Result, winner)
	}
	if puts, gets := f.counts(); puts != 1 || gets != 0 {
		t.Errorf("%d PutItem, %d GetItem; want 1, 0 (the error carries the record)", puts, gets)
	}
	in := f.puts[0]
	if in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("ReturnValuesOnConditionCheckFailure = %q, want ALL_OLD", in.ReturnValuesOnConditionCheckFailure)
	}
	if want := "attribute_not_exists(#k) OR (#exp <= :now_s AND (#st <> :in_progress OR #lease <= :now_ms))"; aws.ToString(in.ConditionExpression) != want {
		t.Errorf("condition = %q, want %q", aws.ToString(in.ConditionExpression), want)
	}
}

func TestReserveConditionWithPrev(t *testing.T) {
	f := &fakeAPI{}
	s := newUnitStore(t, f)
	prev := reservation("tok-old")
	now := t0.Add(2*time.Minute + 1500*time.Millisecond + 700*time.Microsecond)
	rec := core.Reserve("unit:key:1", fp, "tok-new", &prev, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(context.Background(), rec, &prev, now); err != nil {
		t.Fatal(err)
	}
	in := f.puts[0]
	// Over prev alone (core.Reservable): not over an absent or expired record.
	want := "#tok = :prev_tok AND #st = :prev_st AND #lease <= :now_ms AND attribute_not_exists(#names) AND (attribute_not_exists(#exp) OR #exp > :now_s)"
	if got := aws.ToString(in.ConditionExpression); got != want {
		t.Errorf("condition =\n %s\nwant\n %s", got, want)
	}
	v := in.ExpressionAttributeValues
	nowS := v[":now_s"].(*types.AttributeValueMemberN).Value
	nowMs := v[":now_ms"].(*types.AttributeValueMemberN).Value
	// Now is truncated (a record is expired only once now reaches its
	// rounded-up end), so a live record never counts as expired.
	if nowS != fmt.Sprint(now.Unix()) || nowMs != fmt.Sprint(now.UnixMilli()) {
		t.Errorf(":now_s = %s, :now_ms = %s; want %d, %d", nowS, nowMs, now.Unix(), now.UnixMilli())
	}
	if tok := v[":prev_tok"].(*types.AttributeValueMemberS).Value; tok != "tok-old" {
		t.Errorf(":prev_tok = %s", tok)
	}
	if st := v[":prev_st"].(*types.AttributeValueMemberS).Value; st != "in_progress" {
		t.Errorf(":prev_st = %s", st)
	}
	if n := in.ExpressionAttributeNames; n["#st"] != "status" || n["#lease"] != "lease_until_ms" || n["#exp"] != "expires_at" || n["#tok"] != "lease_token" {
		t.Errorf("names = %v", n)
	}
}

func TestReserveReadsWhenTheErrorHasNoItem(t *testing.T) {
	holder := itemOf(t, reservation("tok-holder"))
	f := &fakeAPI{
		put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(nil) },
		get: func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: holder}, nil
		},
	}
	s := newUnitStore(t, f)
	err := s.Reserve(context.Background(), reservation("tok-b"), nil, t0.Add(time.Second))
	var ce *idem.ConflictError
	if !errors.As(err, &ce) || ce.Existing.LeaseToken != "tok-holder" || ce.Existing.Status != core.StatusInProgress {
		t.Fatalf("Reserve = %v, want a conflict with the holder", err)
	}
	if puts, gets := f.counts(); puts != 1 || gets != 1 {
		t.Errorf("%d PutItem, %d GetItem; want 1, 1", puts, gets)
	}
}

func TestReserveRetriesOnceWhenTheBlockerIsGone(t *testing.T) {
	expired := itemOf(t, succeeded("tok-old", []byte(`1`)))
	cases := []struct {
		name       string
		getItem    map[string]types.AttributeValue // what the read finds
		secondPut  error
		want       error // nil, or a sentinel
		puts, gets int
	}{
		{"deleted in between", nil, nil, nil, 2, 1},
		{"expired in between", expired, nil, nil, 2, 1},
		{"changed twice", nil, ccf(nil), ddbstore.ErrUnavailable, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{
				put: func(n int, _ *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
					if n == 1 {
						return nil, ccf(nil)
					}
					return &dynamodb.PutItemOutput{}, tc.secondPut
				},
				get: func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: tc.getItem}, nil
				},
			}
			s := newUnitStore(t, f)
			err := s.Reserve(context.Background(), reservation("tok-b"), nil, t0.Add(2*time.Hour))
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("Reserve = %v, want nil", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || core.Classify(err) != core.Transient):
				t.Fatalf("Reserve = %v, want transient %v", err, tc.want)
			}
			if puts, gets := f.counts(); puts != tc.puts || gets != tc.gets {
				t.Errorf("%d PutItem, %d GetItem; want %d, %d", puts, gets, tc.puts, tc.gets)
			}
		})
	}
}

func TestReserveRecognisesItsOwnRecord(t *testing.T) {
	rec := reservation("tok-me")
	own := itemOf(t, rec)
	f := &fakeAPI{put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(own) }}
	if err := newUnitStore(t, f).Reserve(context.Background(), rec, nil, t0); err != nil {
		t.Fatalf("Reserve that meets its own record = %v, want nil", err)
	}
}

func TestReserveCorruptBlocker(t *testing.T) {
	bad := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "unit:key:1"}, "attempts": &types.AttributeValueMemberS{Value: "x"}}
	f := &fakeAPI{put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(bad) }}
	err := newUnitStore(t, f).Reserve(context.Background(), reservation("tok"), nil, t0)
	var se *ddbstore.Error
	if !errors.Is(err, ddbstore.ErrCorruptRecord) || !errors.As(err, &se) || core.Classify(err) != core.Permanent {
		t.Fatalf("Reserve = %v, want a permanent ErrCorruptRecord", err)
	}
}

func TestCompleteConditionFailed(t *testing.T) {
	rec := reservation("tok-me")
	done := core.Succeed(rec, []byte(`"r"`), t0.Add(time.Second), time.Hour)
	cases := []struct {
		name    string
		errItem map[string]types.AttributeValue
		getItem map[string]types.AttributeValue
		ok      bool
		gets    int
	}{
		{"already ours (ALL_OLD)", itemOf(t, done), nil, true, 0},
		{"already ours (read)", nil, itemOf(t, done), true, 1},
		{"taken over", itemOf(t, reservation("tok-other")), nil, false, 0},
		{"taken over (read)", nil, itemOf(t, reservation("tok-other")), false, 1},
		{"gone", nil, nil, false, 1},
		{"ours but failed", itemOf(t, core.Fail(rec, errors.New("x"), true, t0, time.Hour)), nil, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{
				put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(tc.errItem) },
				get: func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: tc.getItem}, nil
				},
			}
			got, err := newUnitStore(t, f).Complete(context.Background(), done)
			if tc.ok {
				if err != nil || got.Status != core.StatusSucceeded || string(got.Result) != `"r"` {
					t.Fatalf("Complete = %v, %v; want the stored outcome", got, err)
				}
			} else if !errors.Is(err, idem.ErrLeaseLost) {
				t.Fatalf("Complete = %v, want ErrLeaseLost", err)
			} else if strings.Contains(err.Error(), "unit:key:1") {
				t.Errorf("error %q names the key; want its hash", err)
			}
			if _, gets := f.counts(); gets != tc.gets {
				t.Errorf("%d GetItem, want %d", gets, tc.gets)
			}
		})
	}
}

func TestCompleteSizes(t *testing.T) {
	compressible := bytes.Repeat([]byte(`{"a":"bcdefgh"}`), 20_000) // 300 KB
	random := make([]byte, 500<<10)
	_, _ = rand.Read(random)
	small := make([]byte, 5000)
	_, _ = rand.Read(small)
	cases := []struct {
		name     string
		rec      core.Record
		encoding string // "" raw, "gzip"
		omitted  bool
		apart    bool // in a result item: the record would pass 1 KB with it
	}{
		{"small raw", succeeded("tok", []byte(`{"x":1}`)), "", false, false},
		{"at threshold raw", succeeded("tok", bytes.Repeat([]byte("a"), ddbstore.DefaultCompressionThreshold)), "", false, true},
		{"compressible above threshold", succeeded("tok", compressible), "gzip", false, false}, // within 1 KB compressed
		{"incompressible above threshold kept raw", succeeded("tok", small), "", false, true},
		{"incompressible too large", succeeded("tok", random), "", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{}
			s := newUnitStore(t, f)
			got, err := s.Complete(context.Background(), tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			record := f.puts[len(f.puts)-1].Item
			item := record // the item that holds the result
			if _, apart := record[ddbstore.AttrResultItem]; apart != tc.apart || len(f.puts) != map[bool]int{false: 1, true: 2}[tc.apart] {
				t.Fatalf("%d PutItem, result item referenced %v; want it %v", len(f.puts), apart, tc.apart)
			}
			if tc.apart {
				item = f.puts[0].Item
				if size := ddbstore.ItemSize(record); size > ddbstore.RecordUnit {
					t.Errorf("record of %d bytes with its result apart, want at most %d", size, ddbstore.RecordUnit)
				}
			}
			if size := ddbstore.ItemSize(item); size > ddbstore.DefaultMaxItemSize {
				t.Errorf("item size %d > %d", size, ddbstore.DefaultMaxItemSize)
			}
			enc := ""
			if e, ok := record[ddbstore.AttrResultEncoding].(*types.AttributeValueMemberS); ok {
				enc = e.Value
			}
			_, hasResult := item[ddbstore.AttrResult]
			if enc != tc.encoding || got.ResultOmitted != tc.omitted || hasResult == tc.omitted {
				t.Fatalf("encoding %q, omitted %v, result stored %v; want %q, %v", enc, got.ResultOmitted, hasResult, tc.encoding, tc.omitted)
			}
			if tc.omitted {
				if got.Result != nil {
					t.Errorf("returned record has a result of %d bytes, want none (as stored)", len(got.Result))
				}
				return
			}
			// What Get decodes is what was completed.
			f.get = func(_ int, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				for _, it := range []map[string]types.AttributeValue{record, item} {
					if describe(in.Key) == describe(map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: it[ddbstore.DefaultKeyAttribute]}) {
						return &dynamodb.GetItemOutput{Item: it}, nil
					}
				}
				return &dynamodb.GetItemOutput{}, nil
			}
			back, err := s.Get(context.Background(), tc.rec.Key, t0)
			if err != nil || !bytes.Equal(back.Result, tc.rec.Result) || !bytes.Equal(got.Result, tc.rec.Result) {
				t.Fatalf("Get = %d bytes, %v; want the %d bytes", len(back.Result), err, len(tc.rec.Result))
			}
		})
	}

	// A failed record with a huge message is kept, with the message cut.
	huge := core.Fail(reservation("tok"), errors.New(strings.Repeat("é", 300_000)), false, t0, time.Hour)
	f := &fakeAPI{}
	got, err := newUnitStore(t, f).Complete(context.Background(), huge)
	if err != nil {
		t.Fatal(err)
	}
	if size := ddbstore.ItemSize(f.puts[0].Item); size > ddbstore.DefaultMaxItemSize || !strings.HasSuffix(got.Error, "(truncated)") || !utf8Valid(got.Error) {
		t.Fatalf("failed record: item %d bytes, error ends %q", size, got.Error[len(got.Error)-20:])
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

func TestItemSize(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk":     &types.AttributeValueMemberS{Value: "abc"},           // 2 + 3
		"n":      &types.AttributeValueMemberN{Value: "12345"},         // 1 + (6/2+2)=5
		"b":      &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}, // 1 + 3
		"flag":   &types.AttributeValueMemberBOOL{Value: true},         // 4 + 1
		"é":      &types.AttributeValueMemberS{Value: "é"},             // 2 + 2
		"nested": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberS{Value: "y"}}},
	}
	if got, want := ddbstore.ItemSize(item), 5+6+4+5+4+(6+3+1+1+1); got != want {
		t.Errorf("ItemSize = %d, want %d", got, want)
	}
}

// apiErr builds an error as the SDK returns it for an HTTP error response.
func apiErr(status int, inner error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem",
		Err: &awshttp.ResponseError{RequestID: "req-1", ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: inner}}}
}

// sendErr builds an error as the SDK returns it when the HTTP exchange
// failed.
func sendErr(inner error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem",
		Err: &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: inner}}}
}

func generic(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "constructed " + code}
}

// TestErrorTranslation feeds SDK errors, constructed as the SDK builds them,
// to Reserve and Get, and checks the sentinel, the *ddbstore.Error, the class
// and whether Reserve checked for its own record afterwards (only when the
// write may have been applied).
func TestErrorTranslation(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		want  error // sentinel, or nil for none of the package's
		class core.Class
		check bool // Reserve reads to check for its own record
	}{
		{"ProvisionedThroughputExceeded", apiErr(400, &types.ProvisionedThroughputExceededException{Message: aws.String("x")}), ddbstore.ErrThrottled, core.Transient, false},
		{"RequestLimitExceeded", apiErr(400, &types.RequestLimitExceeded{Message: aws.String("x")}), ddbstore.ErrThrottled, core.Transient, false},
		{"ThrottlingException", apiErr(400, generic("ThrottlingException")), ddbstore.ErrThrottled, core.Transient, false},
		{"TransactionConflict", apiErr(400, &types.TransactionConflictException{Message: aws.String("x")}), ddbstore.ErrThrottled, core.Transient, false},
		{"HTTP 429 without a code", apiErr(429, generic("")), ddbstore.ErrThrottled, core.Transient, false},
		{"InternalServerError 500", apiErr(500, &types.InternalServerError{Message: aws.String("x")}), ddbstore.ErrUnavailable, core.Transient, true},
		{"HTTP 503 without a code", apiErr(503, generic("UnknownError")), ddbstore.ErrUnavailable, core.Transient, true},
		{"HTTP 502 without a code", apiErr(502, generic("")), ddbstore.ErrUnavailable, core.Transient, true},
		{"ResourceNotFound", apiErr(400, &types.ResourceNotFoundException{Message: aws.String("x")}), ddbstore.ErrTableNotFound, core.Permanent, false},
		{"ValidationException", apiErr(400, generic("ValidationException")), ddbstore.ErrInvalidRequest, core.Permanent, false},
		{"AccessDeniedException", apiErr(400, generic("AccessDeniedException")), ddbstore.ErrAccessDenied, core.Permanent, false},
		{"UnrecognizedClientException", apiErr(400, generic("UnrecognizedClientException")), ddbstore.ErrAccessDenied, core.Permanent, false},
		{"HTTP 403 without a code", apiErr(403, generic("")), ddbstore.ErrAccessDenied, core.Permanent, false},
		{"unknown 4xx code", apiErr(400, generic("SomethingNewException")), nil, core.Permanent, false},
		{"connection reset", sendErr(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), ddbstore.ErrUnavailable, core.Transient, true},
		{"read timeout", sendErr(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), ddbstore.ErrUnavailable, core.Transient, true},
		{"SDK response timeout", sendErr(&awshttp.ResponseTimeoutError{TimeoutDur: time.Second}), ddbstore.ErrUnavailable, core.Transient, true},
		{"connection refused", sendErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), ddbstore.ErrUnavailable, core.Transient, false},
		{"context deadline", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}, ddbstore.ErrUnavailable, core.Transient, true},
		{"body cut short", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.DeserializationError{Err: errors.New("unexpected EOF")}}, ddbstore.ErrUnavailable, core.Transient, true},
		{"context canceled", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.CanceledError{Err: context.Canceled}}, nil, core.Unclassified, true},
		{"unknown error", errors.New("something else"), nil, core.Unclassified, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{
				put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, tc.err },
				get: func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{}, nil
				},
			}
			s := newUnitStore(t, f)
			err := s.Reserve(context.Background(), reservation("tok"), nil, t0)
			check := func(op string, err error) {
				t.Helper()
				var se *ddbstore.Error
				if !errors.As(err, &se) || se.Op != op || se.Table != "idem-unit" {
					t.Fatalf("%s error = %v, want a *ddbstore.Error{Op: %s, Table: idem-unit}", op, err, op)
				}
				if tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("%s error = %v, want errors.Is %v", op, err, tc.want)
				}
				if !errors.Is(err, tc.err) {
					t.Errorf("%s error does not wrap the SDK's error", op)
				}
				if c := core.Classify(err, core.DefaultClassifiers...); c != tc.class {
					t.Errorf("%s class = %v, want %v", op, c, tc.class)
				}
				// A request refused by the caller's IAM policy is a
				// misconfiguration that names the action to grant.
				denied := tc.name == "AccessDeniedException"
				if errors.Is(err, idem.ErrMisconfigured) != denied || denied && !strings.Contains(err.Error(), "dynamodb:PutItem") {
					t.Errorf("%s error = %v; want idem.ErrMisconfigured naming dynamodb:PutItem: %v", op, err, denied)
				}
			}
			check("reserve", err)
			if _, gets := f.counts(); (gets == 1) != tc.check {
				t.Errorf("Reserve made %d GetItem, want a check: %v", gets, tc.check)
			}
			f.get = func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, tc.err }
			_, err = s.Get(context.Background(), "unit:key:1", t0)
			check("get", err)
			_, err = s.Complete(context.Background(), succeeded("tok", nil))
			check("complete", err)
		})
	}
}

func TestGetExpiry(t *testing.T) {
	// ExpiresAt at a fraction of a second is stored rounded up to the next
	// second; the record is live until then and absent from then on.
	rec := core.Reserve("unit:key:1", fp, "tok", nil, t0, t0.Add(time.Minute), time.Hour+300*time.Millisecond)
	item := itemOf(t, rec)
	f := &fakeAPI{get: func(int, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return &dynamodb.GetItemOutput{Item: item}, nil
	}}
	s := newUnitStore(t, f)
	end := t0.Add(time.Hour + time.Second)
	for _, tc := range []struct {
		at   time.Time
		live bool
	}{
		{rec.ExpiresAt.Add(-time.Nanosecond), true},
		{rec.ExpiresAt, true}, // core would call it expired; the table keeps whole seconds
		{end.Add(-time.Nanosecond), true},
		{end, false},
	} {
		got, err := s.Get(context.Background(), "unit:key:1", tc.at)
		if tc.live && (err != nil || !got.ExpiresAt.Equal(end)) {
			t.Errorf("Get at %v = %v, %v; want the record, expiring at %v", tc.at, got.ExpiresAt, err, end)
		}
		if !tc.live && !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Get at %v = %v, want ErrNotFound", tc.at, err)
		}
	}
}

func TestOptions(t *testing.T) {
	f := &fakeAPI{}
	bad := []struct {
		name  string
		table string
		opts  []ddbstore.Option
	}{
		{"short table name", "ab", nil},
		{"empty key attribute", "idem", []ddbstore.Option{ddbstore.WithKeyAttribute("")}},
		{"key attribute clashes", "idem", []ddbstore.Option{ddbstore.WithKeyAttribute("status")}},
		{"ttl attribute clashes", "idem", []ddbstore.Option{ddbstore.WithTTLAttribute("lease_until_ms")}},
		{"key and ttl the same", "idem", []ddbstore.Option{ddbstore.WithKeyAttribute("id"), ddbstore.WithTTLAttribute("id")}},
		{"negative threshold", "idem", []ddbstore.Option{ddbstore.WithCompressionThreshold(-5)}},
		{"item size too small", "idem", []ddbstore.Option{ddbstore.WithMaxItemSize(100)}},
		{"item size too large", "idem", []ddbstore.Option{ddbstore.WithMaxItemSize(ddbstore.MaxItemSize + 1)}},
	}
	for _, tc := range bad {
		if _, err := ddbstore.New(f, tc.table, tc.opts...); err == nil {
			t.Errorf("%s: New succeeded, want an error", tc.name)
		}
	}
	if _, err := ddbstore.New(nil, "idem"); err == nil {
		t.Errorf("New(nil client) succeeded")
	}
	s, err := ddbstore.New(f, "idem", ddbstore.WithCompressionThreshold(ddbstore.NoCompression), ddbstore.WithMaxItemSize(ddbstore.MaxItemSize), nil)
	if err != nil || s.Table() != "idem" {
		t.Fatalf("New = %v, %v", s, err)
	}
	if _, err := s.Complete(context.Background(), succeeded("tok", bytes.Repeat([]byte("a"), 10_000))); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.puts[0].Item[ddbstore.AttrResultEncoding]; ok {
		t.Errorf("result compressed with NoCompression")
	}
}

func TestArguments(t *testing.T) {
	f := &fakeAPI{}
	s := newUnitStore(t, f)
	ctx := context.Background()
	if err := s.Reserve(ctx, succeeded("tok", nil), nil, t0); err == nil {
		t.Errorf("Reserve of a succeeded record succeeded")
	}
	if err := s.Reserve(ctx, reservation(""), nil, t0); err == nil {
		t.Errorf("Reserve without a token succeeded")
	}
	if _, err := s.Complete(ctx, reservation("tok")); err == nil {
		t.Errorf("Complete of an in-progress record succeeded")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Reserve(canceled, reservation("tok"), nil, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a canceled context = %v", err)
	}
	if _, err := s.Get(ctx, "", t0); !errors.Is(err, ddbstore.ErrKeyTooLarge) {
		t.Errorf("Get of an empty key = %v, want ErrKeyTooLarge", err)
	}
	if puts, gets := f.counts(); puts != 0 || gets != 0 {
		t.Errorf("%d PutItem, %d GetItem; want none", puts, gets)
	}
}
