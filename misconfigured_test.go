package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// refusing is a store whose reservations fail with err.
type refusing struct {
	*memstore.Store
	err error
}

func (s *refusing) Reserve(context.Context, core.Record, *core.Record, time.Time) error { return s.err }

// A store error that says the store is misconfigured is logged at ERROR (no
// call succeeds until someone fixes it); other store failures at WARN. Both
// are permanent store_failed verdicts: the handler does not run.
func TestMisconfiguredStoreLoggedAtError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		level string
	}{
		{"misconfigured", core.MarkPermanent(fmt.Errorf("table keyed id, store expects pk: %w", idem.ErrMisconfigured)), "level=ERROR"},
		{"another failure", core.MarkPermanent(errors.New("access denied")), "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			type plain struct{ idem.Store } // Reserve, not memstore's Acquire
			r, err := idem.New(plain{&refusing{Store: memstore.New(), err: tc.err}}, idem.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			out, err := r.Do(context.Background(), "evt:mis-1:a", []byte(`{}`), func(context.Context) ([]byte, error) { ran = true; return nil, nil })
			if out.Verdict != idem.StoreFailed || !errors.Is(err, tc.err) || ran {
				t.Fatalf("Do = %s, %v, ran %v; want store_failed, not run", out.Verdict, err, ran)
			}
			if !strings.Contains(logs.String(), tc.level) {
				t.Errorf("log %q, want %s", logs.String(), tc.level)
			}
		})
	}
}
