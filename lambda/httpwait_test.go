package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// parkingSleep is a runner's sleep that reports each call on entered and
// then blocks until ctx is done: a duplicate that waits in memory for the
// first request parks in it until that one finishes.
func parkingSleep(entered chan<- struct{}) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
}

// concurrently runs first, whose handler blocks on proceed, and second once
// first's handler has started; proceed is closed when second waits (it
// entered the runner's sleep) or has answered, whichever comes first.
func concurrently[R any](started <-chan struct{}, entered <-chan struct{}, proceed chan<- struct{}, first, second func() R) (R, R) {
	firstDone := make(chan R, 1)
	go func() { firstDone <- first() }()
	<-started
	secondDone := make(chan R, 1)
	go func() { secondDone <- second() }()
	var r2 R
	select {
	case <-entered:
		close(proceed)
		r2 = <-secondDone
	case r2 = <-secondDone:
		close(proceed)
	}
	return <-firstDone, r2
}

// TestHTTPWaitAnswersADuplicateWithTheFirstResponse: a duplicate that
// arrives while the first request runs gets the first one's response,
// replayed, instead of a 409, when waiting is on.
func TestHTTPWaitAnswersADuplicateWithTheFirstResponse(t *testing.T) {
	body := `{"sku":"book","qty":1}`
	tests := []struct {
		name         string
		runOpts      []idem.Option
		opts         []idemlambda.HTTPOption
		wantStatus   int
		wantBody     string
		wantReplayed bool
	}{
		{name: "WithWait: the first response", opts: []idemlambda.HTTPOption{idemlambda.WithWait(5 * time.Second)},
			wantStatus: 201, wantBody: `{"order_id":"ord-1"}`, wantReplayed: true},
		{name: "the runner's WithWait applies without the option", runOpts: []idem.Option{idem.WithWait(5 * time.Second)},
			wantStatus: 201, wantBody: `{"order_id":"ord-1"}`, wantReplayed: true},
		{name: "no wait: 409", wantStatus: 409},
		{name: "WithWait(0) turns the runner's off: 409", runOpts: []idem.Option{idem.WithWait(5 * time.Second)},
			opts: []idemlambda.HTTPOption{idemlambda.WithWait(0)}, wantStatus: 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			e := newEnv(t, append([]idem.Option{idem.WithSleep(parkingSleep(entered))}, tt.runOpts...)...)
			started, proceed := make(chan struct{}), make(chan struct{})
			var runs counter
			api := func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				n := runs.inc("all")
				if n == 1 {
					close(started)
					<-proceed
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
					Body: fmt.Sprintf(`{"order_id":"ord-%d"}`, n)}, nil
			}
			handle, err := idemlambda.HTTPAPI(e.runner, api, append([]idemlambda.HTTPOption{idemlambda.WithClock(e.clock.Now)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := e.ctx(t, 30*time.Second)
			req := v2Req("POST", "/orders", "k-wait-1", body)
			call := func() events.APIGatewayV2HTTPResponse {
				resp, err := handle(ctx, req)
				if err != nil {
					t.Errorf("handle: %v", err)
				}
				return resp
			}
			first, second := concurrently(started, entered, proceed, call, call)
			if first.StatusCode != 201 || first.Body != `{"order_id":"ord-1"}` {
				t.Fatalf("first = %d %s", first.StatusCode, first.Body)
			}
			replayed := second.Headers[idemlambda.HeaderReplayed] == "true"
			if second.StatusCode != tt.wantStatus || replayed != tt.wantReplayed || (tt.wantBody != "" && second.Body != tt.wantBody) {
				t.Errorf("second = %d %s (replayed %v); want %d %s (replayed %v)", second.StatusCode, second.Body, replayed, tt.wantStatus, tt.wantBody, tt.wantReplayed)
			}
			if runs.get("all") != 1 {
				t.Errorf("handler ran %d times, want 1", runs.get("all"))
			}
		})
	}
}

// TestHTTPWaitAcrossSandboxes: with the ALB wrapper, a duplicate that
// arrives while another sandbox runs the request polls the store: it gets
// the response that sandbox stored if it comes within the bound, which ends
// DefaultSafetyMargin before the invocation's deadline at the latest.
func TestHTTPWaitAcrossSandboxes(t *testing.T) {
	tests := []struct {
		name        string
		deadline    time.Duration
		otherAnswer bool // the other sandbox answers during the first poll's sleep
		wantStatus  int
		wantBody    string
		wantSlept   time.Duration
	}{
		{name: "the other sandbox answers: its response", deadline: 30 * time.Second, otherAnswer: true,
			wantStatus: 201, wantBody: `{"order":1}`, wantSlept: 50 * time.Millisecond},
		{name: "deadline near: the wait ends the safety margin before it", deadline: 2500 * time.Millisecond,
			wantStatus: 409, wantSlept: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			other, err := idem.New(e.store, idem.WithClock(e.clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			started, proceed, otherDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var runs counter
			alb := func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				n := runs.inc("all")
				if n == 1 {
					close(started)
					<-proceed
				}
				return events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: "201 Created", Body: fmt.Sprintf(`{"order":%d}`, n),
					Headers: map[string]string{"content-type": "application/json"}}, nil
			}
			var once sync.Once
			sleep := func(ctx context.Context, d time.Duration) error {
				if tt.otherAnswer {
					once.Do(func() { close(proceed); <-otherDone })
				}
				return e.clock.Sleep(ctx, d)
			}
			var logs bytes.Buffer
			mine, err := idem.New(e.store, idem.WithClock(e.clock.Now), idem.WithSleep(sleep), idem.WithRand(func() float64 { return 0 }),
				idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			handleOther, err := idemlambda.ALB(other, alb, idemlambda.WithClock(e.clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			handle, err := idemlambda.ALB(mine, alb, idemlambda.WithClock(e.clock.Now), idemlambda.WithWait(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			req := albReq(false, "POST", "/orders", "k-alb-wait", `{"n":1}`)
			go func() {
				defer close(otherDone)
				if resp, err := handleOther(e.ctx(t, 30*time.Second), req); err != nil || resp.StatusCode != 201 {
					t.Errorf("other sandbox = %d, %v", resp.StatusCode, err)
				}
			}()
			<-started
			resp, err := handle(e.ctx(t, tt.deadline), req)
			if !tt.otherAnswer {
				close(proceed)
			}
			<-otherDone
			if err != nil || resp.StatusCode != tt.wantStatus || (tt.wantBody != "" && resp.Body != tt.wantBody) {
				t.Fatalf("duplicate = %d %s, %v; want %d %s", resp.StatusCode, resp.Body, err, tt.wantStatus, tt.wantBody)
			}
			if replayed := resp.Headers[idemlambda.HeaderReplayed] == "true"; replayed != (tt.wantStatus == 201) {
				t.Errorf("replayed = %v for a %d", replayed, resp.StatusCode)
			}
			var rec struct {
				Waited bool `json:"waited"`
			}
			if err := json.Unmarshal(logs.Bytes(), &rec); err != nil || !rec.Waited {
				t.Errorf("wrapper's log record %s (%v): want waited true", logs.String(), err)
			}
			var slept time.Duration
			for _, d := range e.clock.Sleeps() {
				slept += d
			}
			if slept != tt.wantSlept || runs.get("all") != 1 {
				t.Errorf("slept %v, runs %d; want %v, 1", slept, runs.get("all"), tt.wantSlept)
			}
		})
	}
}

func TestHTTPWaitBadBound(t *testing.T) {
	e := newEnv(t)
	api := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{}, nil
	}
	if _, err := idemlambda.HTTPAPI(e.runner, api, idemlambda.WithWait(-time.Second)); err == nil {
		t.Fatal("WithWait(-1s) accepted")
	}
}
