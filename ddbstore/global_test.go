package ddbstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
)

// describeFixture is DescribeTable's answer of testdata/describetable/name,
// a table "idem" in us-east-1 in the shapes the DynamoDB API reference
// documents (TableDescription, ReplicaDescription,
// GlobalTableWitnessDescription).
func describeFixture(t *testing.T, name string) fakeaws.Response {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "describetable", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return fakeaws.JSONResponse(200, body)
}

// usEast1 is a real DynamoDB client of us-east-1 against srv.
func usEast1(srv *fakeaws.Server) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
}

// stagedPut is a staged write for CheckStaged.
var stagedPut = types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"),
	Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "order-1"}}}}

// CheckTable on each kind of table, from DescribeTable's answers as the API
// returns them: one Region passes; MREC (with or without the mode reported,
// a replica still being created) is refused with an error that names the
// risk and both ways out, unless the store pins a home Region (which must
// be the replica's the client reaches) or accepts the window by name; MRSC
// (three replicas, or two and a witness) passes, and the store's staged
// writes are refused from then on.
func TestCheckTableGlobal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fixture string
		opts    []ddbstore.Option
		want    error    // CheckTable's sentinel, or nil
		says    []string // in the error
		noStage bool     // Stage is refused after the check
	}{
		{"one Region", "one-region", nil, nil, nil, false},
		{"one Region, home Region its own", "one-region", []ddbstore.Option{ddbstore.WithHomeRegion("us-east-1")}, nil, nil, false},
		{"one Region, home Region another", "one-region", []ddbstore.Option{ddbstore.WithHomeRegion("eu-west-1")}, ddbstore.ErrNotHomeRegion,
			[]string{"reaches the replica in us-east-1", `config.WithRegion("eu-west-1")`}, false},
		{"MREC, mode not reported", "mrec", nil, ddbstore.ErrEventualGlobalTable,
			[]string{"replicas in us-west-2 besides us-east-1", "last writer wins", "run twice", "overwritten",
				`ddbstore.WithHomeRegion("us-east-1")`, "ddbstore.WithReplicationWindowAccepted()", "docs/multi-region.md"}, false},
		{"MREC, EVENTUAL", "mrec-eventual", nil, ddbstore.ErrEventualGlobalTable,
			[]string{"replicas in us-west-2, eu-west-1 besides us-east-1"}, false},
		{"MREC, a replica being created", "mrec-creating", nil, ddbstore.ErrEventualGlobalTable, []string{"eu-west-1"}, false},
		{"MREC, home Region", "mrec-eventual", []ddbstore.Option{ddbstore.WithHomeRegion("us-east-1")}, nil, nil, false},
		{"MREC, home Region another", "mrec-eventual", []ddbstore.Option{ddbstore.WithHomeRegion("us-west-2")}, ddbstore.ErrNotHomeRegion,
			[]string{"reaches the replica in us-east-1, and WithHomeRegion names us-west-2", `config.WithRegion("us-west-2")`}, false},
		{"MREC, window accepted", "mrec", []ddbstore.Option{ddbstore.WithReplicationWindowAccepted()}, nil, nil, false},
		{"MRSC", "mrsc", nil, nil, nil, true},
		{"MRSC, a witness", "mrsc-witness", nil, nil, nil, true},
		{"MRSC, home Region", "mrsc", []ddbstore.Option{ddbstore.WithHomeRegion("us-east-1")}, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.New(t, nil)
			srv.Queue(describeFixture(t, tc.fixture), describeFixture(t, tc.fixture))
			client := usEast1(srv)
			store, err := ddbstore.New(client, "idem", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.CheckStaged([]any{stagedPut}); err != nil {
				t.Fatalf("CheckStaged before the check = %v, want nil", err)
			}
			for i, err := range []error{store.CheckTable(context.Background()), ddbstore.CheckTable(context.Background(), client, "idem", tc.opts...)} {
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("check %d = %v, want %v", i, err, tc.want)
				}
				if tc.want == nil {
					continue
				}
				var g *ddbstore.GlobalTableError
				if !errors.As(err, &g) || !errors.Is(err, idem.ErrMisconfigured) || g.Table != "idem" || g.Region != "us-east-1" {
					t.Errorf("check %d = %#v, want a *GlobalTableError of table idem in us-east-1 wrapping idem.ErrMisconfigured", i, g)
				}
				for _, want := range tc.says {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("check %d: error lacks %q: %v", i, want, err)
					}
				}
			}
			err = store.CheckStaged([]any{stagedPut})
			if !tc.noStage {
				if err != nil {
					t.Errorf("CheckStaged after the check = %v, want nil", err)
				}
				return
			}
			for _, want := range []error{ddbstore.ErrNoTransactions, idem.ErrMisconfigured, idem.ErrNoStaging} {
				if !errors.Is(err, want) {
					t.Errorf("CheckStaged after the check = %v, want it to wrap %v", err, want)
				}
			}
			for _, want := range []string{"strong consistency", "refuses transactions", "idem.Stage"} {
				if err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("CheckStaged: error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// A store whose table is never checked makes no DescribeTable and stages
// as before, whatever the table.
func TestUncheckedGlobalTableStages(t *testing.T) {
	t.Parallel()
	srv := fakeaws.New(t, nil)
	srv.Queue(describeFixture(t, "mrsc"))
	store, err := ddbstore.New(usEast1(srv), "idem")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckStaged([]any{stagedPut}); err != nil {
		t.Errorf("CheckStaged = %v, want nil", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestWithHomeRegionValidates(t *testing.T) {
	t.Parallel()
	srv := fakeaws.New(t, nil)
	for _, bad := range []string{"", "EU-WEST-1", "eu west 1", "1eu", strings.Repeat("a", 65)} {
		if _, err := ddbstore.New(usEast1(srv), "idem", ddbstore.WithHomeRegion(bad)); err == nil {
			t.Errorf("WithHomeRegion(%q): no error", bad)
		}
	}
}

// On a server: a table of one Region passes the check, with or without
// its own Region as home; another home Region is named. Then, with
// DescribeTable answering as an MRSC table does (every other call going to
// the server), a handler's ddbstore.Stage fails with an error that names
// the reason, the call fails permanently (as on any store that cannot
// stage), and the staged write is not committed.
func TestCheckTableGlobalOnServer(t *testing.T) {
	integration(t)
	f := newFixture(t)
	region := f.client.Options().Region
	ctx := context.Background()
	for _, tc := range []struct {
		home string
		want error
	}{{"", nil}, {region, nil}, {"ap-southeast-7", ddbstore.ErrNotHomeRegion}} {
		var opts []ddbstore.Option
		if tc.home != "" {
			opts = append(opts, ddbstore.WithHomeRegion(tc.home))
		}
		if err := ddbstore.CheckTable(ctx, f.client, f.table, opts...); !errors.Is(err, tc.want) {
			t.Errorf("home %q: CheckTable = %v, want %v", tc.home, err, tc.want)
		}
	}

	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeaws.New(t, httputil.NewSingleHostReverseProxy(u))
	srv.Queue(describeFixture(t, "mrsc"))
	client := dynamodb.New(f.client.Options(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL); o.HTTPClient = &http.Client{} })
	store, err := ddbstore.New(client, f.table)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckTable(ctx); err != nil {
		t.Fatalf("CheckTable of an MRSC table = %v, want nil", err)
	}
	r, err := idem.New(store)
	if err != nil {
		t.Fatal(err)
	}
	var stageErr error
	out, err := r.Do(ctx, "evt:mrsc-1:charge", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		stageErr = ddbstore.Stage(ctx, f.bizPut("mrsc-1"))
		return nil, stageErr
	})
	if !errors.Is(stageErr, ddbstore.ErrNoTransactions) || !errors.Is(stageErr, idem.ErrMisconfigured) {
		t.Errorf("Stage = %v, want ErrNoTransactions and idem.ErrMisconfigured", stageErr)
	}
	// As for any store that cannot stage (idem.ErrNoStaging): the same
	// call would meet it again.
	if out.Verdict != idem.FailedPermanently || !errors.Is(err, ddbstore.ErrNoTransactions) {
		t.Errorf("Do = %s, %v; want failed_permanently wrapping ErrNoTransactions", out.Verdict, err)
	}
	if f.bizExists(t, "mrsc-1") {
		t.Error("the staged write was committed")
	}
}
