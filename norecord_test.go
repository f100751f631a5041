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

// A try marked core.MarkNoRecord leaves no record: the reservation is
// released, so that more such deliveries than WithMaxAttempts allows are
// each run, and the next one that succeeds runs at attempt 1 and is
// recorded.
func TestNoRecordReleasesTheReservation(t *testing.T) {
	f := newFixture(t) // WithMaxAttempts(5)
	refused := func(ctx context.Context) ([]byte, error) {
		return nil, core.MarkNoRecord(errors.New("401: signature does not match"))
	}
	for i := 1; i <= 7; i++ {
		err := f.do("evt:nr:a", `{}`, refused)
		if !errors.Is(err, idem.ErrTransientFailure) || idem.VerdictOf(err) != idem.FailedTransiently || len(f.clock.Sleeps()) != 0 {
			t.Fatalf("delivery %d: %v (verdict %s), sleeps %v; want a transient failure, not retried in the call", i, err, idem.VerdictOf(err), f.clock.Sleeps())
		}
		if rec, err := f.store.Get(context.Background(), "evt:nr:a", f.clock.Now()); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("delivery %d: the store holds %v (%v); want no record", i, rec, err)
		}
	}
	out, err := f.runner.Do(f.ctx(t, 30e9), "evt:nr:a", []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`"ok"`), nil })
	if err != nil || out.Verdict != idem.Executed || out.Attempts != 1 {
		t.Fatalf("the delivery after = %+v, %v; want executed at attempt 1", out, err)
	}
}

// Over a store that cannot release, the try is recorded as a retryable
// failure, as one marked core.MarkRetryLater is: the key runs again.
func TestNoRecordWithoutReleaser(t *testing.T) {
	type plain struct{ idem.Store } // no Release
	st := memstore.New()
	r, err := idem.New(plain{st})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	h := func(context.Context) ([]byte, error) {
		runs++
		if runs == 1 {
			return nil, core.MarkNoRecord(errors.New("403"))
		}
		return []byte(`1`), nil
	}
	if _, err := r.Do(context.Background(), "evt:nr:b", []byte(`{}`), h); !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("first delivery = %v, want a transient failure", err)
	}
	rec, err := st.Get(context.Background(), "evt:nr:b", time.Now())
	if err != nil || rec.Status != core.StatusFailed || !rec.Retryable {
		t.Fatalf("the store holds %v (%v); want a retryable failure", rec, err)
	}
	if out, err := r.Do(context.Background(), "evt:nr:b", []byte(`{}`), h); err != nil || out.Verdict != idem.Executed || out.Attempts != 2 || runs != 2 {
		t.Fatalf("second delivery = %+v, %v after %d runs; want executed at attempt 2", out, err, runs)
	}
}

// releaseFails refuses every Release with err.
type releaseFails struct {
	*memstore.Store
	err   error
	calls int
}

func (s *releaseFails) Release(ctx context.Context, rec core.Record) error {
	s.calls++
	return s.err
}

// A release that fails leaves the key in progress until its lease ends,
// and says so; a store that reports ErrUnsupported gets the retryable
// failure instead.
func TestNoRecordReleaseFails(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantStatus core.Status
	}{
		{"refused", errors.New("AccessDeniedException: not authorized to perform dynamodb:DeleteItem"), core.StatusInProgress},
		{"unsupported", fmt.Errorf("ddbstore: release: %w", errors.ErrUnsupported), core.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &releaseFails{Store: memstore.New(), err: tc.err}
			r, err := idem.New(st)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Do(context.Background(), "evt:nr:c", []byte(`{}`), func(context.Context) ([]byte, error) {
				return nil, core.MarkNoRecord(errors.New("401"))
			})
			if !errors.Is(err, idem.ErrTransientFailure) || st.calls != 1 {
				t.Fatalf("Do = %v after %d releases; want a transient failure after one", err, st.calls)
			}
			rec, gerr := st.Get(context.Background(), "evt:nr:c", time.Now())
			if gerr != nil || rec.Status != tc.wantStatus {
				t.Fatalf("the store holds %v (%v); want status %s", rec, gerr, tc.wantStatus)
			}
		})
	}
}
