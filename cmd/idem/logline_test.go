package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	idemlambda "github.com/idemgo/idem/lambda"
)

// dynamoProxy stands between a command and the DynamoDB endpoint of the
// environment: it counts the requests by operation, and calls before (when
// set) with each request's operation and body before it forwards it.
type dynamoProxy struct {
	URL    string
	mu     sync.Mutex
	ops    map[string]int
	before func(op string, body []byte)
}

func newDynamoProxy(t *testing.T) *dynamoProxy {
	t.Helper()
	target, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil || target.Host == "" {
		t.Fatalf("no DynamoDB endpoint to stand in front of (AWS_ENDPOINT_URL_DYNAMODB %q)", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	}
	p := &dynamoProxy{ops: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.ops[op]++
		before := p.before
		p.mu.Unlock()
		if before != nil {
			before(op, body)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// calls returns the requests counted so far, by operation, and starts again.
func (p *dynamoProxy) calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.ops
	p.ops = map[string]int{}
	return out
}

// A log line leads to its record with one read: the consumer's log record of a failed
// message names its stored key (a hash, which holds no user data), which inspect reads
// with one GetItem, no Scan; and list, with or without the store's key prefix, shows the
// record under the key_hash of the log line.
func TestLogLineLeadsToRecord(t *testing.T) {
	t.Parallel()
	const prefix = "orders-consumer#"
	f := newFixture(t, ddbstore.WithKeyPrefix(prefix))
	var logs bytes.Buffer
	runner, err := idem.New(f.store, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	handler, err := idemlambda.SQS(runner, "append-ledger", idemlambda.KeyFromBodyField("event_id"),
		func(context.Context, events.SQSMessage) ([]byte, error) {
			return nil, core.MarkPermanent(errors.New("ledger: account closed"))
		})
	if err != nil {
		t.Fatal(err)
	}
	msg := events.SQSMessage{MessageId: "m-1", Body: `{"event_id":"evt_customer_42_order"}`}
	if _, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Verdict string `json:"verdict"`
		KeyHash string `json:"key_hash"`
		Key     string `json:"key"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line); err != nil || line.Verdict != "failed_permanently" {
		t.Fatalf("log line %q (%v), want one record of a permanent failure", logs.String(), err)
	}
	if strings.Contains(logs.String(), "evt_customer_42_order") {
		t.Errorf("the log line holds the event id: %s", logs.String())
	}
	if !core.IsDerivedKey(line.Key) || idem.HashKey(line.Key) != line.KeyHash {
		t.Fatalf("the log line's key %q is not the derived key of its key_hash %s: %s", line.Key, line.KeyHash, logs.String())
	}

	proxy := newDynamoProxy(t)
	proxy.calls()
	v := decodeJSON[inspectView](t, mustCmd(t, exitOK, time.Now(), nil, "inspect", "--table", f.table, "--key-prefix", prefix,
		"--endpoint-url", proxy.URL, "--key", line.Key, "--json").stdout)
	if v.KeyHash != line.KeyHash || v.Key != line.Key || v.Record.State != stateFailedPermanent || v.Record.Error != "ledger: account closed" {
		t.Errorf("inspect --key of the log line's key = %+v %+v", v, v.Record)
	}
	if calls := proxy.calls(); calls["Scan"] != 0 || calls["GetItem"] != 1 {
		t.Errorf("inspect made %v, want one GetItem and no Scan", calls)
	}

	for _, layout := range [][]string{{}, {"--key-prefix", prefix}} {
		list := decodeJSON[listView](t, mustCmd(t, exitOK, time.Now(), nil, append([]string{"list", "--table", f.table, "--json"}, layout...)...).stdout)
		if len(list.Records) != 1 || list.Records[0].KeyHash != line.KeyHash || list.Records[0].Key != line.Key {
			t.Errorf("list %v = %+v, want the record under the log line's key_hash %s and key", layout, list.Records, line.KeyHash)
		}
		text := mustCmd(t, exitOK, time.Now(), nil, append([]string{"list", "--table", f.table}, layout...)...).stdout
		if !strings.Contains(text, line.KeyHash) {
			t.Errorf("list %v does not show the log line's key_hash %s:\n%s", layout, line.KeyHash, text)
		}
	}
}
