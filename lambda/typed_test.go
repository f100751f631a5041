package idemlambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

type shipment struct {
	OrderID string `json:"order_id"`
	Weight  int    `json:"weight"`
	Fail    string `json:"fail,omitempty"`
}

type label struct {
	Tracking string `json:"tracking"`
	Run      int    `json:"run"`
}

func eventBridgeKey(ev events.EventBridgeEvent) (string, error) {
	return idemlambda.EventKey(ev.ID, "print-label")
}

func TestTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idem.WithRetry(1, 0, 0))
	var runs counter
	handle, err := idemlambda.Typed(e.runner,
		func(s shipment) (string, error) {
			if s.OrderID == "" {
				return "", errors.New("no order id")
			}
			return idemlambda.EventKey(s.OrderID, "print-label")
		},
		func(ctx context.Context, s shipment) (label, error) {
			n := runs.inc(s.OrderID)
			switch s.Fail {
			case "permanent":
				return label{}, core.MarkPermanent(errors.New("address invalid"))
			case "transient":
				return label{}, core.MarkTransient(errors.New("carrier down"))
			}
			return label{Tracking: "TRK-" + s.OrderID, Run: n}, nil
		}, idemlambda.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, time.Minute)
	steps := []struct {
		name string
		in   shipment
		want label
		err  func(error) bool
		runs int // executions for in.OrderID after the step
	}{
		{"first executes", shipment{OrderID: "o1", Weight: 3}, label{"TRK-o1", 1}, nil, 1},
		{"duplicate replays the stored value", shipment{OrderID: "o1", Weight: 3}, label{"TRK-o1", 1}, nil, 1},
		{"key reuse with another event", shipment{OrderID: "o1", Weight: 4}, label{}, func(err error) bool { return errors.Is(err, core.ErrKeyReused) }, 1},
		{"permanent failure", shipment{OrderID: "o2", Fail: "permanent"}, label{}, func(err error) bool {
			var fe *core.FailureError
			return errors.As(err, &fe) && !fe.Replayed
		}, 1},
		{"permanent failure replayed", shipment{OrderID: "o2", Fail: "permanent"}, label{}, func(err error) bool {
			var fe *core.FailureError
			return errors.As(err, &fe) && fe.Replayed
		}, 1},
		{"transient failure", shipment{OrderID: "o3", Fail: "transient"}, label{}, func(err error) bool { return errors.Is(err, idem.ErrTransientFailure) }, 1},
		{"transient failure runs again", shipment{OrderID: "o3", Fail: "transient"}, label{}, func(err error) bool { return errors.Is(err, idem.ErrTransientFailure) }, 2},
		{"missing key", shipment{Weight: 1}, label{}, func(err error) bool {
			return errors.Is(err, idemlambda.ErrMissingKey) && errors.Is(err, core.ErrInvalidKey)
		}, 0},
	}
	for i, s := range steps {
		got, err := handle(ctx, s.in)
		if s.err == nil && err != nil || s.err != nil && !s.err(err) {
			t.Fatalf("step %d (%s): err = %v", i, s.name, err)
		}
		if got != s.want {
			t.Errorf("step %d (%s): got %+v want %+v", i, s.name, got, s.want)
		}
		if n := runs.get(s.in.OrderID); n != s.runs {
			t.Errorf("step %d (%s): %d executions want %d", i, s.name, n, s.runs)
		}
	}
}

func TestTypedInProgressPassesThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev := events.EventBridgeEvent{Version: "0", ID: "2c7f8b7e-0000-4000-8000-000000000001", DetailType: "OrderPlaced", Source: "shop.orders", Region: "eu-west-1"}
	key, _ := eventBridgeKey(ev)
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	e.hold(t, key, payload, e.clock.Now().Add(30*time.Second))
	handle, err := idemlambda.Typed(e.runner, eventBridgeKey, func(ctx context.Context, ev events.EventBridgeEvent) (string, error) {
		return "printed", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = handle(e.ctx(t, time.Minute), ev)
	var ipe *core.InProgressError
	if !errors.As(err, &ipe) || !ipe.RetryAt.Equal(e.clock.Now().Add(30*time.Second)) {
		t.Fatalf("err = %v; want *core.InProgressError retrying at the lease end", err)
	}
}

func TestTypedOmittedResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, err := idem.New(&faultStore{Store: e.store, omit: true}, idem.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	handle, err := idemlambda.Typed(r, func(s string) (string, error) { return "verbatim-key-" + s, nil },
		func(ctx context.Context, s string) (string, error) { return "big result", nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, time.Minute)
	if got, err := handle(ctx, "a"); got != "big result" || err != nil {
		t.Fatalf("first = %q, %v", got, err)
	}
	if got, err := handle(ctx, "a"); got != "" || !errors.Is(err, idemlambda.ErrResultOmitted) {
		t.Fatalf("replay = %q, %v; want ErrResultOmitted", got, err)
	}
}

func TestTypedArgumentErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := func(string) (string, error) { return "k", nil }
	h := func(context.Context, string) (string, error) { return "", nil }
	for name, f := range map[string]func() error{
		"nil runner":  func() error { _, err := idemlambda.Typed(nil, key, h); return err },
		"nil key fn":  func() error { _, err := idemlambda.Typed[string, string](e.runner, nil, h); return err },
		"nil handler": func() error { _, err := idemlambda.Typed[string, string](e.runner, key, nil); return err },
		"nil clock": func() error {
			_, err := idemlambda.Typed(e.runner, key, h, idemlambda.WithClock(nil))
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: constructor succeeded, want an error", name)
		}
	}
	// A key that is not valid verbatim is refused by the runner.
	handle, _ := idemlambda.Typed(e.runner, func(s string) (string, error) { return s, nil }, h)
	if _, err := handle(e.ctx(t, time.Minute), "short"); !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("short verbatim key: err = %v want ErrInvalidKey", err)
	}
}
