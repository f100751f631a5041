package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeaws"
)

// sweep deletes the records past retention and nothing else: a dry run lists
// them and changes nothing; --max stops with a token to go on; a record
// written anew between the scan and its delete is left, and counted so.
func TestSweep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := t0.Add(72 * time.Hour)
	for _, key := range []string{"evt:old:done", "evt:renewed"} {
		f.put(t, key, spec{status: core.StatusSucceeded, retention: time.Hour})
	}
	f.put(t, "evt:old:failed", spec{status: core.StatusFailed, errText: "declined", retention: time.Hour})
	f.put(t, "evt:live", spec{status: core.StatusSucceeded, at: now.Sub(t0) - 10*time.Minute, done: now.Sub(t0) - 10*time.Minute})
	stored := func(key string) bool {
		out, err := f.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Item) > 0
	}
	base := []string{"sweep", "--table", f.table, "--json"}

	dry := decodeJSON[sweepView](t, mustCmd(t, exitOK, now, nil, append(base, "--dry-run")...).stdout)
	if dry.Found != 3 || len(dry.Items) != 3 || dry.Deleted != 0 || !stored("evt:old:done") {
		t.Fatalf("dry run = %+v, want the three records past retention listed, nothing deleted", dry)
	}

	r := mustCmd(t, exitLeftBehind, now, nil, append(base, "--dry-run", "--max", "1")...)
	first := decodeJSON[sweepView](t, r.stdout)
	if first.Found != 1 || first.Stopped != stoppedMax || first.Next == "" || !strings.Contains(r.stderr, "stopped (--max reached): continue with --next") {
		t.Fatalf("--max 1 = %+v, stderr %s", first, r.stderr)
	}

	// A delivery writes evt:renewed anew between the scan and its delete.
	proxy := newDynamoProxy(t)
	var once sync.Once
	proxy.before = func(op string, body []byte) {
		if op == "DeleteItem" && strings.Contains(string(body), "evt:renewed") {
			once.Do(func() {
				f.put(t, "evt:renewed", spec{status: core.StatusInProgress, at: now.Sub(t0), token: "tok-again"})
			})
		}
	}
	v := decodeJSON[sweepView](t, mustCmd(t, exitOK, now, nil, append(base, "--rate", "1000", "--endpoint-url", proxy.URL)...).stdout)
	if v.Found != 3 || v.Deleted != 2 || v.Left != 1 || len(v.Items) != 0 {
		t.Errorf("sweep = %+v, want 2 deleted and the renewed one left", v)
	}
	for key, want := range map[string]bool{"evt:old:done": false, "evt:old:failed": false, "evt:renewed": true, "evt:live": true} {
		if stored(key) != want {
			t.Errorf("%s stored: %v, want %v", key, !want, want)
		}
	}
	r = mustCmd(t, exitOK, now, nil, "sweep", "--table", f.table)
	if !strings.Contains(r.stdout, "deleted 0 items past retention") || !strings.Contains(r.stdout, "end of table") {
		t.Errorf("a second sweep printed %s", r.stdout)
	}
}

// On a global table in eventual consistency every command stops at the
// table's check with exit 12 and says which flag to pass; with
// --accept-replication-window, or --home-region naming the Region of the
// replica the endpoint reaches, it goes on (here: a list of an empty
// table). DescribeTable answers as the API does (ddbstore's fixtures).
func TestGlobalTableFlags(t *testing.T) {
	mrec, err := os.ReadFile("../../ddbstore/testdata/describetable/mrec.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	for _, tc := range []struct {
		name string
		args []string
		want int
		says string
	}{
		{"no flag", nil, exitGlobal, "pass --home-region"},
		{"home Region elsewhere", []string{"--home-region", "us-west-2"}, exitGlobal, "pass --region with the home Region"},
		{"home Region", []string{"--home-region", "us-east-1"}, exitOK, ""},
		{"window accepted", []string{"--accept-replication-window"}, exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeaws.New(t, nil)
			srv.Queue(fakeaws.JSONResponse(200, mrec))
			if tc.want == exitOK {
				srv.Queue(fakeaws.JSONResponse(200, []byte(`{"Items":[],"Count":0,"ScannedCount":0}`)))
			}
			r := mustCmd(t, tc.want, t0, nil, append([]string{"list", "--table", "idem", "--endpoint-url", srv.URL}, tc.args...)...)
			if !strings.Contains(r.stderr, tc.says) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.says)
			}
		})
	}
}
