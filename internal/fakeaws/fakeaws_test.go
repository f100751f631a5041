package fakeaws

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func TestQueueThenFallback(t *testing.T) {
	t.Parallel()
	fallback := Response{Status: 200, Body: []byte(`{}`)}
	s := New(t, fallback)
	s.Queue(DynamoDBError(400, "ThrottlingException", "slow"), S3Error(503, "SlowDown", "slow"))
	var got []int
	for range 3 {
		resp, _, err := get(t, http.DefaultClient, s.URL+"/x")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != "[400 503 200]" {
		t.Errorf("statuses = %v want [400 503 200]", got)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0] != (Request{Method: "POST", Path: "/x", Target: "DynamoDB_20120810.GetItem"}) {
		t.Errorf("Requests() = %+v", reqs)
	}
}

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestNoAnswerFailsTheTest(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	s := New(rec, nil)
	resp, _, err := get(t, http.DefaultClient, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if resp.StatusCode != 500 || len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "no answer queued") {
		t.Errorf("status %d, errors %q; want 500 and one test error", resp.StatusCode, rec.errors)
	}
}

func TestShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer Response
		status int
		header map[string]string
		check  func(body []byte) error
	}{
		{"DynamoDB code gets the namespace", DynamoDBError(400, "ProvisionedThroughputExceededException", "m"), 400,
			map[string]string{"Content-Type": "application/x-amz-json-1.0"},
			jsonType("com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException")},
		{"DynamoDB code with a namespace is kept", DynamoDBError(400, "com.amazon.coral.availability#ThrottlingException", "m"), 400,
			nil, jsonType("com.amazon.coral.availability#ThrottlingException")},
		{"SQS client fault", SQSError(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "m"), 400,
			map[string]string{"X-Amzn-Query-Error": "AWS.SimpleQueueService.NonExistentQueue;Sender", "X-Amz-Crc32": ""},
			jsonType("com.amazonaws.sqs#QueueDoesNotExist")},
		{"SQS server fault", SQSError(500, "InternalError", "", "m"), 500,
			map[string]string{"X-Amzn-Query-Error": "InternalError;Receiver"}, jsonType("com.amazonaws.sqs#InternalError")},
		{"S3", S3Error(404, "NoSuchKey", "a <key> & more"), 404,
			map[string]string{"Content-Type": "application/xml"}, s3Code("NoSuchKey", "a <key> & more")},
		{"S3 in a 200", S3Error200("InternalError", "m"), 200, nil, s3Code("InternalError", "m")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(t, tc.answer)
			resp, body, err := get(t, http.DefaultClient, s.URL)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d want %d", resp.StatusCode, tc.status)
			}
			for k, want := range tc.header {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("header %s = %q want %q", k, got, want)
				}
			}
			if c := resp.Header.Get("X-Amz-Crc32"); c != "" && c != strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10) {
				t.Errorf("X-Amz-Crc32 %s does not match the body", c)
			}
			if err := tc.check(body); err != nil {
				t.Errorf("body %s: %v", body, err)
			}
		})
	}
}

func jsonType(want string) func([]byte) error {
	return func(body []byte) error {
		var v struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		if v.Type != want || v.Message == "" {
			return fmt.Errorf("__type %q message %q; want __type %q and a message", v.Type, v.Message, want)
		}
		return nil
	}
}

func s3Code(code, message string) func([]byte) error {
	return func(body []byte) error {
		var v struct {
			XMLName   xml.Name `xml:"Error"`
			Code      string
			Message   string
			RequestID string `xml:"RequestId"`
		}
		if err := xml.Unmarshal(body, &v); err != nil {
			return err
		}
		if v.Code != code || v.Message != message || v.RequestID == "" {
			return fmt.Errorf("got %+v; want code %q message %q and a request id", v, code, message)
		}
		return nil
	}
}

func TestTransportFaults(t *testing.T) {
	t.Parallel()
	ok := Response{Status: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: []byte(`{"Item":{}}`)}
	tests := []struct {
		name   string
		answer http.Handler
		client *http.Client
		want   func(error) bool
	}{
		{"Reset", Reset(), http.DefaultClient, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{"CloseConn", CloseConn(), http.DefaultClient, func(err error) bool { return errors.Is(err, io.EOF) }},
		{"Truncated", Truncated(ok, 5), http.DefaultClient, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"ResetMidBody", ResetMidBody(ok, 5), http.DefaultClient, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{"Hang", Hang(), &http.Client{Timeout: 50 * time.Millisecond}, func(err error) bool {
			var te interface{ Timeout() bool }
			return errors.As(err, &te) && te.Timeout()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(t, nil)
			s.Queue(tc.answer)
			_, _, err := get(t, tc.client, s.URL)
			if err == nil || !tc.want(err) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
