package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

func TestWithFingerprintSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := []byte(`{"order":"42","sent_at":"2030-01-02T03:04:05Z","trace":{"id":"t-1","order":"x"}}`)
	again := []byte(`{"sent_at":"2030-01-02T03:14:05Z","order":"42","trace":{"id":"t-9","order":"x"}}`)
	other := []byte(`{"order":"43","sent_at":"2030-01-02T03:04:05Z","trace":{"id":"t-1","order":"x"}}`)
	tests := []struct {
		name      string
		sel       core.Selection
		againErr  error
		otherErr  error
		newErr    error
		againWant idem.Verdict
	}{
		{"whole payload", core.Selection{}, core.ErrKeyReused, core.ErrKeyReused, nil, idem.KeyReused},
		{"ignore sent_at and trace.id", core.IgnoreFields("sent_at", "trace.id"), nil, core.ErrKeyReused, nil, idem.Replayed},
		{"select order", core.SelectFields("order"), nil, core.ErrKeyReused, nil, idem.Replayed},
		{"select a field the payload lacks", core.SelectFields("order_id"), core.ErrFieldAbsent, core.ErrFieldAbsent, core.ErrFieldAbsent, idem.InvalidPayload},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := idem.New(memstore.New(), idem.WithFingerprintSelection(tc.sel))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.FingerprintSelection().String(); got != tc.sel.String() {
				t.Errorf("FingerprintSelection() = %s want %s", got, tc.sel)
			}
			runs := 0
			fn := func(context.Context) ([]byte, error) { runs++; return []byte(`"ok"`), nil }
			if _, err := r.Do(ctx, "evt:order-42:notify", first, fn); !errors.Is(err, tc.newErr) {
				t.Fatalf("first: err = %v want %v", err, tc.newErr)
			}
			out, err := r.Do(ctx, "evt:order-42:notify", again, fn)
			if !errors.Is(err, tc.againErr) || out.Verdict != tc.againWant {
				t.Errorf("published again: %v, %v; want %v, %v", out.Verdict, err, tc.againWant, tc.againErr)
			}
			if _, err := r.Do(ctx, "evt:order-42:notify", other, fn); !errors.Is(err, tc.otherErr) {
				t.Errorf("another order under the key: err = %v want %v", err, tc.otherErr)
			}
		})
	}
	if _, err := idem.New(memstore.New(), idem.WithFingerprintSelection(core.IgnoreFields("a."))); !errors.Is(err, core.ErrInvalidSelection) {
		t.Errorf("a bad path: err = %v", err)
	}
}

// A call's own fingerprint function replaces the runner's, and does not
// reach the calls its handler makes.
func TestContextWithFingerprint(t *testing.T) {
	t.Parallel()
	r, err := idem.New(memstore.New(), idem.WithFingerprintSelection(core.SelectFields("id")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	byLength := idem.ContextWithFingerprint(ctx, func(p []byte) (string, error) {
		if len(p) == 0 {
			return "", errors.New("empty")
		}
		return fmt.Sprint(len(p)), nil
	})
	var inner error
	out, err := r.Do(byLength, "evt:text-1:print", []byte("not JSON at all"), func(ctx context.Context) ([]byte, error) {
		// The handler's own call gets the runner's selection again.
		_, inner = r.Do(ctx, "evt:nested-1:print", []byte(`{"no_id":1}`), func(context.Context) ([]byte, error) { return nil, nil })
		return nil, nil
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do with the context's function: %v, %v", out.Verdict, err)
	}
	if !errors.Is(inner, core.ErrFieldAbsent) {
		t.Errorf("nested Do: err = %v; want the runner's selection (ErrFieldAbsent), not the outer call's function", inner)
	}
	out, err = r.Do(byLength, "evt:text-1:print", []byte("equal length!!!"), func(context.Context) ([]byte, error) { return nil, nil })
	if err != nil || out.Verdict != idem.Replayed {
		t.Errorf("a payload the function finds equal: %v, %v; want replayed", out.Verdict, err)
	}
	out, err = r.Do(byLength, "evt:text-2:print", nil, func(context.Context) ([]byte, error) { return nil, nil })
	if !errors.Is(err, core.ErrInvalidPayload) || out.Verdict != idem.InvalidPayload {
		t.Errorf("the function's error: %v, %v; want it wrapped with ErrInvalidPayload", out.Verdict, err)
	}
}

func ExampleWithFingerprintSelection() {
	// The publisher stamps each publish: the stamp is not part of the event.
	runner, err := idem.New(memstore.New(), idem.WithFingerprintSelection(core.IgnoreFields("published_at")))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	send := func(context.Context) ([]byte, error) { return []byte(`"sent"`), nil }
	for _, payload := range []string{
		`{"order":"42","published_at":"2030-01-02T03:04:05Z"}`,
		`{"order":"42","published_at":"2030-01-02T03:09:00Z"}`,
		`{"order":"43","published_at":"2030-01-02T03:09:00Z"}`,
	} {
		out, err := runner.Do(ctx, "evt:order-42:notify", []byte(payload), send)
		fmt.Println(out.Verdict, err != nil)
	}
	// Output:
	// executed false
	// replayed false
	// key_reused true
}
