package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// renamed names every record attribute otherwise than by default, several
// of them with DynamoDB reserved words (data, count, timestamp, token).
var renamed = ddbstore.AttributeNames{
	Status:         "idem_status",
	Fingerprint:    "validation",
	LeaseToken:     "token",
	LeaseUntil:     "in_progress_expiration",
	Attempts:       "count",
	Retryable:      "retry",
	Error:          "cause",
	Result:         "data",
	ResultEncoding: "data_encoding",
	ResultOmitted:  "data_omitted",
	UpdatedAt:      "timestamp",
	ResultRef:      "body_ref",
	ResultSHA256:   "body_sha256",
	ResultSize:     "body_size",
	ResultItem:     "body_item",
	Steps:          "recovery_points",
	StepNames:      "recovery_point_names",
	StepsSize:      "recovery_points_size",
	StepsUntil:     "recovery_points_until",
	// A reserved word too.
	AttemptsCarried: "counter",
}

// singleTable is a single-table layout: a sort key with a fixed value, a
// key prefix, and every attribute renamed.
func singleTable(prefix, sortValue string) []ddbstore.Option {
	return []ddbstore.Option{
		ddbstore.WithKeyAttribute("PK"),
		ddbstore.WithSortKey("SK", sortValue),
		ddbstore.WithKeyPrefix(prefix),
		ddbstore.WithTTLAttribute("ttl"),
		ddbstore.WithAttributeNames(renamed),
	}
}

// defaultNames are the attribute names of the default layout.
var defaultNames = []string{ddbstore.DefaultKeyAttribute, ddbstore.DefaultTTLAttribute, ddbstore.AttrStatus, ddbstore.AttrFingerprint,
	ddbstore.AttrLeaseToken, ddbstore.AttrLeaseUntil, ddbstore.AttrAttempts, ddbstore.AttrRetryable, ddbstore.AttrError,
	ddbstore.AttrResult, ddbstore.AttrResultEncoding, ddbstore.AttrResultOmitted, ddbstore.AttrUpdatedAt,
	ddbstore.AttrResultRef, ddbstore.AttrResultSHA256, ddbstore.AttrResultSize,
	ddbstore.AttrSteps, ddbstore.AttrStepNames, ddbstore.AttrStepsSize, ddbstore.AttrAttemptsCarried, ddbstore.AttrStepsUntil,
	ddbstore.AttrResultItem}

// singleTableNames are the attribute names of singleTable.
var singleTableNames = []string{"PK", "SK", "ttl", renamed.Status, renamed.Fingerprint, renamed.LeaseToken, renamed.LeaseUntil,
	renamed.Attempts, renamed.Retryable, renamed.Error, renamed.Result, renamed.ResultEncoding, renamed.ResultOmitted, renamed.UpdatedAt,
	renamed.ResultRef, renamed.ResultSHA256, renamed.ResultSize,
	renamed.Steps, renamed.StepNames, renamed.StepsSize, renamed.AttemptsCarried, renamed.StepsUntil, renamed.ResultItem}

func TestLayoutOptions(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{}
	long := strings.Repeat("n", 256)
	sortFunc := func(k string) string { return k }
	bad := []struct {
		name string
		opts []ddbstore.Option
	}{
		{"empty sort key attribute", []ddbstore.Option{ddbstore.WithSortKey("", "v")}},
		{"empty sort key value", []ddbstore.Option{ddbstore.WithSortKey("sk", "")}},
		{"sort key value too long", []ddbstore.Option{ddbstore.WithSortKey("sk", strings.Repeat("v", 1025))}},
		{"sort key value not UTF-8", []ddbstore.Option{ddbstore.WithSortKey("sk", "\xff")}},
		{"nil sort key function", []ddbstore.Option{ddbstore.WithSortKeyFunc("sk", nil)}},
		{"sort key function attribute empty", []ddbstore.Option{ddbstore.WithSortKeyFunc("", sortFunc)}},
		{"sort key named as the key", []ddbstore.Option{ddbstore.WithSortKey(ddbstore.DefaultKeyAttribute, "v")}},
		{"sort key named as the TTL", []ddbstore.Option{ddbstore.WithSortKey(ddbstore.DefaultTTLAttribute, "v")}},
		{"sort key named as a record attribute", []ddbstore.Option{ddbstore.WithSortKeyFunc(ddbstore.AttrStatus, sortFunc)}},
		{"two record attributes with one name", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "s", Error: "s"})}},
		{"record attribute named as a default one", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Error: ddbstore.AttrResult})}},
		{"record attribute named as the key", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Result: ddbstore.DefaultKeyAttribute})}},
		{"record attribute named as the TTL", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{UpdatedAt: ddbstore.DefaultTTLAttribute})}},
		{"record attribute named as the sort key", []ddbstore.Option{ddbstore.WithSortKey("sk", "v"), ddbstore.WithAttributeNames(ddbstore.AttributeNames{Attempts: "sk"})}},
		{"record attribute name too long", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: long})}},
		{"record attribute name not UTF-8", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "st\xff"})}},
		{"record attribute name of DynamoDB's", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "aws:rep:updatetime"})}},
		{"key attribute name of DynamoDB's", []ddbstore.Option{ddbstore.WithKeyAttribute("aws:pk")}},
		{"prefix too long", []ddbstore.Option{ddbstore.WithKeyPrefix(strings.Repeat("p", ddbstore.MaxKeyPrefix+1))}},
		{"prefix not UTF-8", []ddbstore.Option{ddbstore.WithKeyPrefix("orders\xff#")}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ddbstore.New(f, "idem", tc.opts...); err == nil {
				t.Errorf("New succeeded, want an error")
			}
			tables := &fakeTables{}
			if _, err := ddbstore.CreateTable(context.Background(), tables, "idem", tc.opts...); err == nil || tables.created != nil {
				t.Errorf("CreateTable = %v, created %v; want an error and no table", err, tables.created != nil)
			}
		})
	}
	good := []struct {
		name string
		opts []ddbstore.Option
	}{
		{"single table", singleTable("orders#", "idempotency#")},
		{"key named status once status is renamed", []ddbstore.Option{ddbstore.WithKeyAttribute(ddbstore.AttrStatus),
			ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "state"})}},
		{"names swapped", []ddbstore.Option{ddbstore.WithAttributeNames(ddbstore.AttributeNames{Result: ddbstore.AttrError, Error: ddbstore.AttrResult})}},
		{"reserved words", []ddbstore.Option{ddbstore.WithKeyAttribute("key"), ddbstore.WithSortKey("range", "v"), ddbstore.WithTTLAttribute("ttl")}},
		{"longest prefix", []ddbstore.Option{ddbstore.WithKeyPrefix(strings.Repeat("p", ddbstore.MaxKeyPrefix))}},
		{"empty prefix", []ddbstore.Option{ddbstore.WithKeyPrefix("")}},
		{"longest sort key value", []ddbstore.Option{ddbstore.WithSortKey("sk", strings.Repeat("v", 1024))}},
		{"sort key function replaces a value", []ddbstore.Option{ddbstore.WithSortKey("sk", "v"), ddbstore.WithSortKeyFunc("sk", sortFunc)}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ddbstore.New(f, "idem", tc.opts...); err != nil {
				t.Errorf("New = %v, want a store", err)
			}
		})
	}
}

// fakeAdmin is fakeAPI with DeleteItem and Scan, which it records.
type fakeAdmin struct {
	*fakeAPI
	mu      sync.Mutex
	deletes []*dynamodb.DeleteItemInput // guarded by mu
	scans   []*dynamodb.ScanInput       // guarded by mu
	scan    func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error)
}

func (f *fakeAdmin) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, in)
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *fakeAdmin) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	f.mu.Lock()
	f.scans = append(f.scans, in)
	f.mu.Unlock()
	if f.scan == nil {
		return &dynamodb.ScanOutput{}, nil
	}
	return f.scan(in)
}

// request is what a request names: the attributes of its item or key, its
// expression's attribute names, and its expression.
type request struct {
	what  string
	attrs []string
	names map[string]string
	expr  string
}

func attrsOf(m map[string]types.AttributeValue) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// placeholders are expression attribute names and values.
var placeholders = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// expressionWords are the words an expression may hold besides placeholders.
var expressionWords = []string{"AND", "OR", "NOT", "attribute_not_exists", "attribute_exists", "begins_with",
	"SET", "REMOVE", "if_not_exists", "+"}

// TestLayoutRequests makes every call of the store with the single-table
// layout and checks every request: its items and keys have the layout's
// names only (none of the default names), and its expressions name no
// attribute but through ExpressionAttributeNames, whose values are the
// layout's names.
func TestLayoutRequests(t *testing.T) {
	t.Parallel()
	var getKeys []map[string]types.AttributeValue
	f := &fakeAdmin{fakeAPI: &fakeAPI{get: func(_ int, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		getKeys = append(getKeys, in.Key)
		return &dynamodb.GetItemOutput{}, nil
	}}}
	s, err := ddbstore.New(f, "idem-unit", singleTable("orders#", "idempotency#")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := reservation("tok")
	prev := rec
	failed := core.Fail(rec, errors.New("boom"), true, t0, time.Hour)
	calls := []error{
		s.Reserve(ctx, rec, nil, t0),
		s.Reserve(ctx, core.Reserve(rec.Key, fp, "tok-2", &prev, t0.Add(time.Hour), t0.Add(2*time.Hour), time.Hour), &prev, t0.Add(time.Hour)),
		s.Reserve(ctx, core.Reserve(rec.Key, fp, "tok-3", &failed, t0, t0.Add(time.Hour), time.Hour), &failed, t0),
		func() error {
			_, err := s.Complete(ctx, core.Succeed(rec, bytes.Repeat([]byte("r"), 10_000), t0, time.Hour))
			return err
		}(),
		func() error { _, err := s.Complete(ctx, failed); return err }(),
		s.Release(ctx, failed),
	}
	_, getErr := s.Get(ctx, rec.Key, t0)
	_, listErr := s.List(ctx, ddbstore.ListInput{Status: core.StatusFailed})
	calls = append(calls, listErr)
	for i, err := range calls {
		if err != nil {
			t.Fatalf("call %d = %v", i, err)
		}
	}
	if !errors.Is(getErr, idem.ErrNotFound) {
		t.Fatalf("Get from the empty fake = %v, want ErrNotFound", getErr)
	}
	var reqs []request
	for _, in := range f.puts {
		reqs = append(reqs, request{"PutItem", attrsOf(in.Item), in.ExpressionAttributeNames, aws.ToString(in.ConditionExpression)})
	}
	for _, key := range getKeys {
		reqs = append(reqs, request{what: "GetItem", attrs: attrsOf(key)})
	}
	for _, in := range f.deletes {
		reqs = append(reqs, request{"DeleteItem", attrsOf(in.Key), in.ExpressionAttributeNames, aws.ToString(in.ConditionExpression)})
	}
	for _, in := range f.scans {
		reqs = append(reqs, request{"Scan", nil, in.ExpressionAttributeNames, aws.ToString(in.FilterExpression)})
	}
	if len(reqs) != 8 {
		t.Fatalf("%d requests, want 8", len(reqs))
	}
	for _, r := range reqs {
		checkRequest(t, r)
	}
	if got, want := aws.ToString(f.scans[0].FilterExpression), "begins_with(#k, :prefix) AND #sk = :sk AND #st = :st"; got != want {
		t.Errorf("scan filter = %q, want %q", got, want)
	}
	wantKey := `PK:S="orders#unit:key:1" SK:S="idempotency#" `
	for what, key := range map[string]map[string]types.AttributeValue{"GetItem": getKeys[0], "DeleteItem": f.deletes[0].Key} {
		if got := describe(key); got != wantKey {
			t.Errorf("%s key = %s, want %s", what, got, wantKey)
		}
	}
}

func checkRequest(t *testing.T, r request) {
	t.Helper()
	for _, a := range r.attrs {
		if !slices.Contains(singleTableNames, a) {
			t.Errorf("%s names attribute %q, not one of the layout's", r.what, a)
		}
	}
	for ph, a := range r.names {
		if !slices.Contains(singleTableNames, a) || slices.Contains(defaultNames, a) {
			t.Errorf("%s: %s = %q, not one of the layout's names", r.what, ph, a)
		}
	}
	for _, w := range strings.FieldsFunc(placeholders.ReplaceAllString(r.expr, " "), func(c rune) bool {
		return strings.ContainsRune(" ()<>=,", c)
	}) {
		if !slices.Contains(expressionWords, w) {
			t.Errorf("%s expression %q names %q directly", r.what, r.expr, w)
		}
	}
	for _, ph := range placeholders.FindAllString(r.expr, -1) {
		if strings.HasPrefix(ph, "#") && r.names[ph] == "" {
			t.Errorf("%s expression %q uses %s, which it does not define", r.what, r.expr, ph)
		}
	}
}

func TestLayoutKeyLimits(t *testing.T) {
	t.Parallel()
	prefix := strings.Repeat("p", 1000)
	tests := []struct {
		name string
		opts []ddbstore.Option
		key  string
		ok   bool
	}{
		{"prefix and key at the limit", []ddbstore.Option{ddbstore.WithKeyPrefix(prefix)}, strings.Repeat("k", 1048), true},
		{"prefix and key over the limit", []ddbstore.Option{ddbstore.WithKeyPrefix(prefix)}, strings.Repeat("k", 1049), false},
		{"sort key value from the key", []ddbstore.Option{ddbstore.WithSortKeyFunc("sk", func(k string) string { return "idem#" + k })}, "evt:1:a", true},
		{"empty sort key value", []ddbstore.Option{ddbstore.WithSortKeyFunc("sk", func(string) string { return "" })}, "evt:1:a", false},
		{"sort key value over 1024 bytes", []ddbstore.Option{ddbstore.WithSortKeyFunc("sk", func(k string) string { return k })}, strings.Repeat("k", 1025), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAdmin{fakeAPI: &fakeAPI{}}
			s, err := ddbstore.New(f, "idem-unit", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rec := core.Reserve(tc.key, fp, "tok", nil, t0, t0.Add(time.Minute), time.Hour)
			_, getErr := s.Get(ctx, tc.key, t0)
			_, completeErr := s.Complete(ctx, core.Succeed(rec, nil, t0, time.Hour))
			for i, err := range []error{s.Reserve(ctx, rec, nil, t0), getErr, completeErr, s.Release(ctx, rec)} {
				if tooLarge := errors.Is(err, ddbstore.ErrKeyTooLarge); tooLarge == tc.ok {
					t.Errorf("call %d = %v; want ErrKeyTooLarge %v", i, err, !tc.ok)
				}
			}
			puts, gets := f.counts()
			want := 0
			if tc.ok {
				want = 4 // Reserve, Get, Complete, Release
			}
			if calls := puts + gets + len(f.deletes); calls != want {
				t.Errorf("%d calls made, want %d", calls, want)
			}
		})
	}
}

// TestLayoutItemSize: the size accounting counts the layout's names and key
// values exactly. The largest result kept whole is smaller, by exactly the
// extra bytes of the layout's names, prefix and sort key, than with the
// default layout.
func TestLayoutItemSize(t *testing.T) {
	t.Parallel()
	result := make([]byte, ddbstore.DefaultMaxItemSize)
	_, _ = rand.Read(result)
	largest := func(opts ...ddbstore.Option) int {
		f := &fakeAPI{}
		s, err := ddbstore.New(f, "idem-unit", append(opts, ddbstore.WithCompressionThreshold(ddbstore.NoCompression))...)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 0, len(result) // result[:lo] is kept, result[:hi] is not
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			got, err := s.Complete(context.Background(), succeeded("tok", result[:mid]))
			if err != nil {
				t.Fatal(err)
			}
			if got.ResultOmitted {
				hi = mid
			} else {
				lo = mid
				if size := ddbstore.ItemSize(f.puts[len(f.puts)-1].Item); size > ddbstore.DefaultMaxItemSize {
					t.Fatalf("kept an item of %d bytes", size)
				}
			}
		}
		return lo
	}
	const prefix, skValue = "orders#", "idempotency#"
	// The largest result is kept in a result item, which has these
	// attributes: the key, the sort key, the TTL attribute and the result.
	extra := len(prefix) + len("SK") + len(skValue) + (len("PK") - len("pk")) + (len("ttl") - len("expires_at")) +
		len(renamed.Result) - len(ddbstore.AttrResult)
	if def, single := largest(), largest(singleTable(prefix, skValue)...); def-single != extra {
		t.Errorf("largest result kept: %d bytes by default, %d with the single-table layout; difference %d, want %d", def, single, def-single, extra)
	}
}

// TestListTokensWithSortKey: List's continuation token carries both key
// values, and a token made for another layout is refused.
func TestListTokensWithSortKey(t *testing.T) {
	t.Parallel()
	last := map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "orders#evt:1:a"},
		"SK": &types.AttributeValueMemberS{Value: "idempotency#"},
	}
	f := &fakeAdmin{fakeAPI: &fakeAPI{}, scan: func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return &dynamodb.ScanOutput{LastEvaluatedKey: last}, nil
	}}
	s, err := ddbstore.New(f, "idem-unit", singleTable("orders#", "idempotency#")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	page, err := s.List(ctx, ddbstore.ListInput{})
	if err != nil || page.Next == "" {
		t.Fatalf("List = %+v, %v; want a continuation token", page, err)
	}
	if _, err := s.List(ctx, ddbstore.ListInput{Next: page.Next}); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(f.scans[1].ExclusiveStartKey), describe(last); got != want {
		t.Errorf("start key = %s, want %s", got, want)
	}
	hashOnly, err := ddbstore.New(f, "idem-unit")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hashOnly.List(ctx, ddbstore.ListInput{Next: page.Next}); !errors.Is(err, ddbstore.ErrBadToken) {
		t.Errorf("a sort-key token given to a store without one = %v, want ErrBadToken", err)
	}
	for _, tok := range []string{"v1.b3JkZXJz", "v1.b3JkZXJz.", "v1..aWQ", "v1.a.b.c"} {
		if _, err := s.List(ctx, ddbstore.ListInput{Next: tok}); !errors.Is(err, ddbstore.ErrBadToken) {
			t.Errorf("List with token %q = %v, want ErrBadToken", tok, err)
		}
	}
}

// fakeTables is a TableAPI that records the table CreateTable makes and
// describes it as ACTIVE.
type fakeTables struct {
	mu      sync.Mutex
	created *dynamodb.CreateTableInput     // guarded by mu
	ttl     *types.TimeToLiveSpecification // guarded by mu
	table   *types.TableDescription        // an existing table, if set
}

func (f *fakeTables) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.table != nil {
		return nil, &types.ResourceInUseException{Message: aws.String("table exists")}
	}
	f.created = in
	return &dynamodb.CreateTableOutput{}, nil
}

func (f *fakeTables) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.table != nil {
		return &dynamodb.DescribeTableOutput{Table: f.table}, nil
	}
	if f.created == nil {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive,
		KeySchema: f.created.KeySchema, AttributeDefinitions: f.created.AttributeDefinitions}}, nil
}

func (f *fakeTables) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}}, nil
}

func (f *fakeTables) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ttl = in.TimeToLiveSpecification
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// tableResource is the part of an AWS::DynamoDB::Table resource that
// CreateTable decides.
type tableResource struct {
	Type       string `yaml:"Type"`
	Properties struct {
		BillingMode          string `yaml:"BillingMode"`
		AttributeDefinitions []struct {
			AttributeName string `yaml:"AttributeName"`
			AttributeType string `yaml:"AttributeType"`
		} `yaml:"AttributeDefinitions"`
		KeySchema []struct {
			AttributeName string `yaml:"AttributeName"`
			KeyType       string `yaml:"KeyType"`
		} `yaml:"KeySchema"`
		TimeToLiveSpecification struct {
			AttributeName string `yaml:"AttributeName"`
			Enabled       bool   `yaml:"Enabled"`
		} `yaml:"TimeToLiveSpecification"`
	} `yaml:"Properties"`
}

// docBlock returns the fenced code block that follows marker in doc.
func docBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("docs/dynamodb.md has no %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "```")
	if ok {
		_, rest, ok = strings.Cut(rest, "\n") // the fence's language
	}
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("docs/dynamodb.md: no code block after %q", marker)
	}
	return block
}

// docOption returns the string arguments of option's call in a Go block.
func docOption(t *testing.T, block, option string) []string {
	t.Helper()
	m := regexp.MustCompile(`ddbstore\.` + option + `\(((?:"[^"]*"(?:, )?)+)\)`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("docs/dynamodb.md: the options have no %s", option)
	}
	var args []string
	for _, a := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
		args = append(args, a[1])
	}
	return args
}

// TestSingleTableSnippet checks the single-table resource shown in
// docs/dynamodb.md against the table CreateTable makes for the options
// shown beside it: billing mode, key schema and TTL attribute.
func TestSingleTableSnippet(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/dynamodb.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	goBlock := docBlock(t, doc, "<!-- single-table-options")
	sk := docOption(t, goBlock, "WithSortKey")
	opts := []ddbstore.Option{
		ddbstore.WithKeyAttribute(docOption(t, goBlock, "WithKeyAttribute")[0]),
		ddbstore.WithSortKey(sk[0], sk[1]),
		ddbstore.WithKeyPrefix(docOption(t, goBlock, "WithKeyPrefix")[0]),
		ddbstore.WithTTLAttribute(docOption(t, goBlock, "WithTTLAttribute")[0]),
	}
	tables := &fakeTables{}
	if _, err := ddbstore.CreateTable(context.Background(), tables, "app", opts...); err != nil {
		t.Fatal(err)
	}
	var resources map[string]tableResource
	if err := yaml.Unmarshal([]byte(docBlock(t, doc, "<!-- single-table-resource")), &resources); err != nil {
		t.Fatalf("docs/dynamodb.md: the resource is not YAML: %v", err)
	}
	if len(resources) != 1 {
		t.Fatalf("docs/dynamodb.md: %d resources, want 1", len(resources))
	}
	for name, r := range resources {
		p := r.Properties
		var got []string
		got = append(got, "Type="+r.Type, "BillingMode="+p.BillingMode)
		for _, d := range p.AttributeDefinitions {
			got = append(got, "attr "+d.AttributeName+" "+d.AttributeType)
		}
		for _, k := range p.KeySchema {
			got = append(got, "key "+k.AttributeName+" "+k.KeyType)
		}
		got = append(got, fmt.Sprintf("ttl %s %v", p.TimeToLiveSpecification.AttributeName, p.TimeToLiveSpecification.Enabled))

		in := tables.created
		want := []string{"Type=AWS::DynamoDB::Table", "BillingMode=" + string(in.BillingMode)}
		for _, d := range in.AttributeDefinitions {
			want = append(want, "attr "+aws.ToString(d.AttributeName)+" "+string(d.AttributeType))
		}
		for _, k := range in.KeySchema {
			want = append(want, "key "+aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		want = append(want, fmt.Sprintf("ttl %s %v", aws.ToString(tables.ttl.AttributeName), aws.ToBool(tables.ttl.Enabled)))
		if !slices.Equal(got, want) {
			t.Errorf("docs/dynamodb.md resource %s:\n got %q\nwant %q (CreateTable)", name, got, want)
		}
	}
}

// TestCreateTableSchemaMismatch: CreateTable refuses an existing table
// whose key schema is not the options' (without a server: a fake answers
// as DynamoDB does for an existing table).
func TestCreateTableSchemaMismatch(t *testing.T) {
	t.Parallel()
	table := func(keys ...string) *types.TableDescription {
		d := &types.TableDescription{TableStatus: types.TableStatusActive}
		for i, k := range keys {
			kt := types.KeyTypeHash
			if i == 1 {
				kt = types.KeyTypeRange
			}
			d.KeySchema = append(d.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k), KeyType: kt})
			d.AttributeDefinitions = append(d.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k), AttributeType: types.ScalarAttributeTypeS})
		}
		return d
	}
	numericSK := table("PK", "SK")
	numericSK.AttributeDefinitions[1].AttributeType = types.ScalarAttributeTypeN
	tests := []struct {
		name  string
		table *types.TableDescription
		opts  []ddbstore.Option
		ok    bool
	}{
		{"single table matches", table("PK", "SK"), singleTable("orders#", "idempotency#"), true},
		{"default matches", table("pk"), nil, true},
		{"hash-only table, sort key wanted", table("PK"), singleTable("orders#", "idempotency#"), false},
		{"table with a sort key, none wanted", table("pk", "sk"), nil, false},
		{"another sort key name", table("PK", "sort"), singleTable("orders#", "idempotency#"), false},
		{"keys swapped", table("SK", "PK"), singleTable("orders#", "idempotency#"), false},
		{"numeric sort key", numericSK, singleTable("orders#", "idempotency#"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ddbstore.CreateTable(context.Background(), &fakeTables{table: tc.table}, "app", tc.opts...)
			if mismatch := errors.Is(err, ddbstore.ErrSchemaMismatch); mismatch == tc.ok || (tc.ok && err != nil) {
				t.Errorf("CreateTable = %v, want ErrSchemaMismatch %v", err, !tc.ok)
			}
			err = ddbstore.CheckTable(context.Background(), &fakeTables{table: tc.table}, "app", tc.opts...)
			if mismatch := errors.Is(err, ddbstore.ErrSchemaMismatch); mismatch == tc.ok || (tc.ok && err != nil) {
				t.Errorf("CheckTable = %v, want ErrSchemaMismatch %v", err, !tc.ok)
			}
		})
	}
}

func TestRenameEveryDefaultName(t *testing.T) {
	t.Parallel()
	defs := ddbstore.DefaultAttributeNames()
	if len(defs) != len(defaultNames)-2 { // defaultNames adds the key and TTL attributes
		t.Fatalf("DefaultAttributeNames has %d names, the default layout %d record attributes", len(defs), len(defaultNames)-2)
	}
	var n ddbstore.AttributeNames
	for _, def := range defs {
		if !n.Rename(def, "x_"+def) {
			t.Errorf("Rename(%q) refused a default name", def)
		}
	}
	if n.Status != "x_"+ddbstore.AttrStatus || n.AttemptsCarried != "x_"+ddbstore.AttrAttemptsCarried || n.Steps != "x_"+ddbstore.AttrSteps {
		t.Errorf("Rename did not set the fields: %+v", n)
	}
	for _, bad := range []string{"", "pk", "expires_at", "Status"} {
		if n.Rename(bad, "y") {
			t.Errorf("Rename(%q) accepted a name that is no record attribute's default", bad)
		}
	}
}
