package ddbstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
)

// logRecords decodes the JSON log records in buf.
func logRecords(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// keyedID is a table keyed "id" and a store on it left with the default
// key attribute ("pk"), as a user who forgot WithKeyAttribute("id") has
// it; its recorder has counted no call yet.
func keyedID(t *testing.T) *fixture {
	t.Helper()
	integration(t)
	f := &fixture{rec: newRecorder()}
	f.client = newClient(t, f.rec, 1)
	f.table, f.info = newTable(t, f.client, ddbstore.WithKeyAttribute("id"))
	f.rec.reset() // CreateTable's own DescribeTable calls
	s, err := ddbstore.New(f.client, f.table)
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	return f
}

// A store left with its default key attribute ("pk") over a table keyed
// "id", as a user who forgot WithKeyAttribute has it: every call fails
// with an error that names the table's key schema, the store's expectation
// and the option that fixes it, logged at ERROR, permanent, and the handler
// never runs. The table is described once, not once per call.
func TestMisconfiguredKeyAttributeNamed(t *testing.T) {
	f := keyedID(t)
	rec, store := f.rec, f.store
	var logs bytes.Buffer
	r, err := idem.New(store, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := range 3 {
		out, err := r.Do(context.Background(), "evt:schema-1:notify", []byte(`{}`), func(context.Context) ([]byte, error) { ran++; return nil, nil })
		if out.Verdict != idem.StoreFailed || !errors.Is(err, ddbstore.ErrSchemaMismatch) {
			t.Fatalf("call %d: %s, %v; want store_failed wrapping ErrSchemaMismatch", i, out.Verdict, err)
		}
		for _, want := range []string{`table has id (HASH, S)`, `want a single string partition key "pk"`, `ddbstore.WithKeyAttribute("id")`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("call %d: error lacks %q: %v", i, want, err)
			}
		}
		if c := core.Classify(err, core.DefaultClassifiers...); c != core.Permanent {
			t.Errorf("call %d: class %v, want permanent", i, c)
		}
	}
	if ran != 0 {
		t.Errorf("the handler ran %d times", ran)
	}
	if n := rec.count("DescribeTable"); n != 1 {
		t.Errorf("%d DescribeTable calls for 3 refused calls, want 1", n)
	}
	recs := logRecords(t, &logs)
	if len(recs) != 3 {
		t.Fatalf("%d log records, want 3:\n%s", len(recs), logs.String())
	}
	for _, m := range recs {
		if m["level"] != "ERROR" || m["verdict"] != "store_failed" || !strings.Contains(m["error"].(string), `WithKeyAttribute("id")`) {
			t.Errorf("log record %v, want ERROR store_failed naming WithKeyAttribute(\"id\")", m)
		}
	}
}

// The error is typed, for code that acts on it: the table's key schema, the
// store's, the fix, and the markers of a misconfiguration.
func TestMisconfiguredTableTyped(t *testing.T) {
	f := keyedID(t)
	rec, table, store := f.rec, f.table, f.store
	now := time.Now()
	err := store.Reserve(context.Background(), core.Reserve("evt:schema-2:a", fp, "tok", nil, now, now.Add(time.Minute), time.Hour), nil, now)
	var se *ddbstore.SchemaError
	var de *ddbstore.Error
	if !errors.As(err, &se) || !errors.As(err, &de) || de.Op != "reserve" {
		t.Fatalf("Reserve = %v, want a *SchemaError in a reserve *Error", err)
	}
	if se.Table != table || se.Have != "id (HASH, S)" || se.Want != `a single string partition key "pk"` ||
		se.Fix != `configure the store with ddbstore.WithKeyAttribute("id")` {
		t.Errorf("SchemaError = %+v", se)
	}
	if !errors.Is(err, idem.ErrMisconfigured) || !errors.Is(err, ddbstore.ErrInvalidRequest) {
		t.Errorf("Reserve = %v, want idem.ErrMisconfigured and ErrInvalidRequest found in it", err)
	}
	// Every call of the store that names a key: Get, Complete, Acquire.
	if _, err := store.Get(context.Background(), "evt:schema-2:a", now); !errors.As(err, &se) {
		t.Errorf("Get = %v, want a *SchemaError", err)
	}
	if _, _, err := store.Acquire(context.Background(), core.Reserve("evt:schema-2:a", fp, "tok", nil, now, now.Add(time.Minute), time.Hour),
		now, core.Policy{MaxAttempts: 5}); !errors.As(err, &se) {
		t.Errorf("Acquire = %v, want a *SchemaError", err)
	}
	if n := rec.count("DescribeTable"); n != 1 {
		t.Errorf("%d DescribeTable calls, want 1", n)
	}
}

// Store.CheckTable is the check at cold start: one DescribeTable, a
// *SchemaError for a table keyed otherwise (kept: a later refused call
// needs no DescribeTable), nil for the store's table.
func TestStoreCheckTable(t *testing.T) {
	f := keyedID(t)
	rec, client, table, store := f.rec, f.client, f.table, f.store
	var se *ddbstore.SchemaError
	if err := store.CheckTable(context.Background()); !errors.As(err, &se) || se.Have != "id (HASH, S)" {
		t.Fatalf("CheckTable = %v, want a *SchemaError", err)
	}
	if _, err := store.Get(context.Background(), "evt:schema-3:a", time.Now()); !errors.As(err, &se) {
		t.Errorf("Get after CheckTable = %v, want a *SchemaError", err)
	}
	if n := rec.count("DescribeTable"); n != 1 {
		t.Errorf("%d DescribeTable calls, want CheckTable's alone", n)
	}
	good, err := ddbstore.New(client, table, ddbstore.WithKeyAttribute("id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := good.CheckTable(context.Background()); err != nil {
		t.Errorf("CheckTable of the store's own table = %v", err)
	}
	missing, err := ddbstore.New(client, table+"-missing")
	if err != nil {
		t.Fatal(err)
	}
	if err := missing.CheckTable(context.Background()); !errors.Is(err, ddbstore.ErrTableNotFound) {
		t.Errorf("CheckTable of a missing table = %v, want ErrTableNotFound", err)
	}
}

// validation is DynamoDB's answer to a key that does not fit the table's
// key schema.
var validation = fakeaws.DynamoDBError(400, "com.amazon.coral.validate#ValidationException",
	"The provided key element does not match the schema")

func describeAnswer(keys string) fakeaws.Response {
	return fakeaws.JSONResponse(200, []byte(`{"Table":{"TableName":"orders","TableStatus":"ACTIVE",`+keys+`}}`))
}

// What the store answers to a ValidationException, by what DescribeTable
// tells of the table, in DynamoDB's own shapes: a *SchemaError naming the
// fix when the key schema is not the store's; the plain invalid request
// when it is (the refusal had another cause); a hint when the table cannot
// be described. An answer is kept, a transient failure of DescribeTable
// is not.
func TestValidationExplainedByDescribeTable(t *testing.T) {
	t.Parallel()
	hashID := `"KeySchema":[{"AttributeName":"id","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}]`
	for _, tc := range []struct {
		name     string
		describe fakeaws.Response
		fix      string // the SchemaError's Fix; "" for none
		hint     bool   // a hint that the key schema could not be read
		kept     bool   // a second refused call describes no more
	}{
		{"keyed id", describeAnswer(hashID), `configure the store with ddbstore.WithKeyAttribute("id")`, false, true},
		{"single table", describeAnswer(`"KeySchema":[{"AttributeName":"PK","KeyType":"HASH"},{"AttributeName":"SK","KeyType":"RANGE"}],` +
			`"AttributeDefinitions":[{"AttributeName":"PK","AttributeType":"S"},{"AttributeName":"SK","AttributeType":"S"}]`),
			`configure the store with ddbstore.WithKeyAttribute("PK") and ddbstore.WithSortKey("SK", value)`, false, true},
		{"numeric key", describeAnswer(`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"N"}]`),
			`no option fixes it`, false, true},
		{"the store's own schema", describeAnswer(`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]`),
			"", false, true},
		{"DescribeTable denied", fakeaws.DynamoDBError(400, "AccessDeniedException", "not authorized to perform: dynamodb:DescribeTable"), "", true, true},
		{"DescribeTable throttled", fakeaws.DynamoDBError(400, "ThrottlingException", "rate exceeded"), "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.New(t, nil)
			srv.Queue(validation, tc.describe, validation)
			if !tc.kept {
				srv.Queue(describeAnswer(hashID))
			}
			client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
			store, err := ddbstore.New(client, "orders")
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			rec := core.Reserve("evt:schema-4:a", fp, "tok", nil, now, now.Add(time.Minute), time.Hour)
			err = store.Reserve(context.Background(), rec, nil, now)
			var se *ddbstore.SchemaError
			if got := errors.As(err, &se); got != (tc.fix != "") || (got && !strings.HasPrefix(se.Fix, tc.fix)) {
				t.Errorf("Reserve = %v; want a SchemaError %v with the fix %q", err, tc.fix != "", tc.fix)
			}
			if !errors.Is(err, ddbstore.ErrInvalidRequest) || core.Classify(err) != core.Permanent {
				t.Errorf("Reserve = %v, want a permanent ErrInvalidRequest", err)
			}
			if got := strings.Contains(err.Error(), "could not be read"); got != tc.hint {
				t.Errorf("Reserve = %v, hint %v, want %v", err, got, tc.hint)
			}
			_ = store.Reserve(context.Background(), rec, nil, now)
			describes := 0
			for _, r := range srv.Requests() {
				if r.Target == "DynamoDB_20120810.DescribeTable" {
					describes++
				}
			}
			if want := map[bool]int{true: 1, false: 2}[tc.kept]; describes != want {
				t.Errorf("%d DescribeTable calls for two refused reservations, want %d", describes, want)
			}
		})
	}
}
