package ddbstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// stepStore makes a table with opts on the test server and a store on it.
func stepStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run under `go run ./internal/cmd/testenv -server dynalite`, or set IDEM_SKIP_INTEGRATION=1")
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, func(o *config.LoadOptions) error { o.Region = "us-east-1"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts, o.HTTPClient = 1, freshConnections() })
	setup := setupClient(cfg)
	table := fmt.Sprintf("idem-steps-%d", time.Now().UnixNano())
	if _, err := CreateTable(ctx, setup, table, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = setup.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) })
	s, err := New(client, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStepConditionMatchesCore checks RecordStep's update condition,
// evaluated by a real DynamoDB-API server, against core.AddStep: the
// update applies exactly when core appends, and a refusal is answered as
// core says (a retried write, a conflict, a lost lease).
func TestStepConditionMatchesCore(t *testing.T) {
	layouts := map[string][]Option{
		"default": nil,
		"renamed": {WithKeyAttribute("PK"), WithSortKey("SK", "idempotency#"), WithAttributeNames(AttributeNames{
			Status: "state", LeaseToken: "token", LeaseUntil: "lease", UpdatedAt: "timestamp",
			Steps: "done", StepNames: "done_names", StepsSize: "done_size"})},
	}
	for name, opts := range layouts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkStepConditions(t, stepStore(t, opts...))
		})
	}
}

func checkStepConditions(t *testing.T, s *Store) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	recorded := []core.Step{{Name: "charge", Result: []byte("ch_1")}, {Name: "empty"}}
	steps := []core.Step{{Name: "charge", Result: []byte("ch_1")}, {Name: "charge", Result: []byte("ch_2")},
		{Name: "empty"}, {Name: "email", Result: []byte{0, 0xff}}, {Name: "charg", Result: []byte("ch_1")}}
	n := 0
	for _, stored := range storedRecords(at) {
		for _, withSteps := range []bool{false, true} {
			for _, sec := range []int{0, 29, 30, 31, 61, 4000} {
				for _, token := range []string{"tok-old", "tok-other"} {
					for _, step := range steps {
						n++
						st := stored
						st.Key = fmt.Sprintf("step:%d", n)
						if withSteps {
							st.Steps = recorded
						}
						checkStep(t, s, st, token, step, at(sec))
					}
				}
			}
		}
	}
	checkStep(t, s, core.Record{Key: "step:absent"}, "tok-old", steps[0], at(0))
}

func checkStep(t *testing.T, s *Store, stored core.Record, token string, step core.Step, now time.Time) {
	t.Helper()
	var cur *core.Record
	if stored.Status != "" {
		s.putRaw(t, stored)
		cur = &stored
	}
	const ttl = 1 << 40 // the step item outlives every record here
	want, w := core.AddStep(cur, token, step, now)
	_, err := s.client.UpdateItem(context.Background(), s.stepInput(stored.Key, token, step, now, 1<<20, ttl))
	var ccf *types.ConditionalCheckFailedException
	applied := err == nil
	if applied != (w == core.StepAppend) || (err != nil && !errors.As(err, &ccf)) {
		t.Errorf("step %s over %v (steps %q) with %s at %s: applied %v (%v), core says %s", step.Name, stored, stored.Steps, token, now.Format(time.TimeOnly), applied, err, w)
		return
	}
	item, rerr := s.getItem(context.Background(), "test", stored.Key)
	if rerr != nil {
		t.Fatal(rerr)
	}
	st, rerr := s.storedStepsOf(item)
	if rerr != nil {
		t.Fatal(rerr)
	}
	switch {
	case applied && !sameEntries(st.entries, want.Steps, true):
		t.Errorf("step %s over %v: stored steps %v, core says %q with the last one referenced", step.Name, stored, st.entries, want.Steps)
	case !applied && len(item) > 0 && !sameEntries(st.entries, stored.Steps, false):
		t.Errorf("refused step %s over %v: stored steps %v, want unchanged", step.Name, stored, st.entries)
	case applied:
		return
	}
	_, again, answer := s.refusedStep(stored.Key, token, step, now, ttl, item)
	wantErr := map[core.StepWrite]error{core.StepRecorded: nil, core.StepConflict: idem.ErrStepConflict, core.StepLeaseLost: idem.ErrLeaseLost}[w]
	if again || !errors.Is(answer, wantErr) || (wantErr == nil && answer != nil) {
		t.Errorf("refused step %s over %v: answer %v (again %v), want %v", step.Name, stored, answer, again, wantErr)
	}
}

// sameEntries reports whether entries are steps, kept in the record, but
// the last one referenced where lastRef is set.
func sameEntries(entries []stepEntry, steps []core.Step, lastRef bool) bool {
	if len(entries) != len(steps) {
		return false
	}
	for i, e := range entries {
		if lastRef && i == len(steps)-1 {
			if !e.isRef || e.ref != refOf(steps[i]) {
				return false
			}
			continue
		}
		if e.isRef || e.step.Name != steps[i].Name || !bytes.Equal(e.step.Result, steps[i].Result) {
			return false
		}
	}
	return true
}

func sameSteps(a, b []core.Step) bool {
	return slices.EqualFunc(a, b, func(x, y core.Step) bool { return x.Name == y.Name && bytes.Equal(x.Result, y.Result) })
}

// TestStepsWithinTheItemLimit: a step that cannot fit is refused with a
// permanent ErrItemTooLarge before any call; steps are recorded until the
// item's budget is used up, then refused with ErrItemTooLarge without a
// write; the record still completes as a failure with all its steps (the
// message shortened), and a retry's reservation carries them.
func TestStepsWithinTheItemLimit(t *testing.T) {
	s := stepStore(t, WithMaxItemSize(4096))
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	rec := core.Reserve("evt:big:1", strings.Repeat("f", 64), "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	big := core.Step{Name: "big", Result: bytes.Repeat([]byte("x"), 4096)}
	if err := s.RecordStep(ctx, rec.Key, "tok-a", big, now); !errors.Is(err, ErrItemTooLarge) || core.Classify(err) != core.Permanent {
		t.Fatalf("RecordStep of a step past the limit = %v, want a permanent ErrItemTooLarge", err)
	}
	for i := 0; ; i++ {
		st := core.Step{Name: fmt.Sprintf("s%d", i), Result: bytes.Repeat([]byte("y"), 300)}
		err := s.RecordStep(ctx, rec.Key, "tok-a", st, now)
		if errors.Is(err, ErrItemTooLarge) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Steps = append(rec.Steps, st)
	}
	got, err := s.Get(ctx, rec.Key, now)
	if err != nil || len(rec.Steps) < 5 || !sameSteps(got.Steps, rec.Steps) {
		t.Fatalf("Get = %d steps, %v; want the %d recorded (at least 5)", len(got.Steps), err, len(rec.Steps))
	}
	failed, err := s.Complete(ctx, core.Fail(rec, errors.New(strings.Repeat("e", 8000)), true, now, time.Hour))
	if err != nil || !sameSteps(failed.Steps, rec.Steps) {
		t.Fatalf("Complete of a failure with %d steps = %d steps, %v; want them kept", len(rec.Steps), len(failed.Steps), err)
	}
	retry := core.Reserve(rec.Key, rec.Fingerprint, "tok-b", &failed, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, retry, &failed, now); err != nil || len(retry.Steps) != len(rec.Steps) {
		t.Fatalf("re-reservation with %d steps = %v", len(retry.Steps), err)
	}
}

// TestReserveConditionCountsSteps checks the takeover branch of the
// reservation condition, evaluated by the server, against core.Replaceable
// for stored records and prevs with different numbers of steps.
func TestReserveConditionCountsSteps(t *testing.T) {
	s := stepStore(t)
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	all := []core.Step{{Name: "a", Result: []byte("1")}, {Name: "b"}}
	base := core.Record{Fingerprint: "fp", LeaseToken: "tok-old", Attempts: 1, UpdatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	inProgress, failed := base, base
	inProgress.Status, inProgress.LeaseUntil = core.StatusInProgress, t0
	failed.Status, failed.Retryable = core.StatusFailed, true
	now := t0.Add(time.Second)
	k := 0
	for _, stored := range []core.Record{inProgress, failed} {
		for n := range 3 {
			for pn := range 3 {
				k++
				st := stored
				st.Key, st.Steps = fmt.Sprintf("steps:%d", k), all[:n]
				s.putRaw(t, st)
				prev := st
				prev.Steps = all[:pn]
				want := core.Replaceable(st, &prev, now)
				rec := core.Reserve(st.Key, "fp", "tok-new", &prev, now, now.Add(time.Minute), time.Hour)
				_, err := s.client.PutItem(context.Background(), s.reserveInput(s.encode(normalize(rec), nil, ""), &prev, now))
				if got := err == nil; got != want || want != (n == pn) {
					t.Errorf("reserve over %s with %d steps, prev with %d: applied %v (%v), core says %v", st.Status, n, pn, got, err, want)
				}
			}
		}
	}
}
