package core

import (
	"math"
	"testing"
	"time"
)

var justUnder1 = math.Nextafter(1, 0)

func TestBackoff(t *testing.T) {
	const base, maxDelay = 100 * time.Millisecond, time.Second
	tests := []struct {
		name    string
		attempt int
		r       float64
		want    time.Duration
	}{
		{"r=0 gives no delay", 3, 0, 0},
		{"first retry full", 1, justUnder1, 100 * time.Millisecond},
		{"second retry full", 2, justUnder1, 200 * time.Millisecond},
		{"fourth retry full", 4, justUnder1, 800 * time.Millisecond},
		{"capped", 5, justUnder1, time.Second},
		{"huge attempt capped", 1000, justUnder1, time.Second},
		{"half", 2, 0.5, 100 * time.Millisecond},
		{"attempt 0 counts as 1", 0, justUnder1, 100 * time.Millisecond},
		{"r=1 clamped", 1, 1, 100 * time.Millisecond},
		{"negative r clamped", 1, -3, 0},
		{"NaN r clamped", 1, math.NaN(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Backoff(tc.attempt, base, maxDelay, tc.r); got != tc.want {
				t.Fatalf("Backoff(%d, r=%v) = %v want %v", tc.attempt, tc.r, got, tc.want)
			}
		})
	}
	if got := Backoff(3, 0, maxDelay, 0.9); got != 0 {
		t.Fatalf("zero base: %v", got)
	}
	if got := Backoff(3, base, 0, justUnder1); got != base {
		t.Fatalf("max below base: %v want %v", got, base)
	}
}

func TestNextRetry(t *testing.T) {
	p := RetryPlan{Attempt: 1, MaxAttempts: 3, Base: 100 * time.Millisecond, Max: time.Second, Now: t0, Deadline: t0.Add(10 * time.Second), R: justUnder1}
	tests := []struct {
		name   string
		modify func(p *RetryPlan)
		want   time.Duration
		ok     bool
	}{
		{"first retry", func(p *RetryPlan) {}, 100 * time.Millisecond, true},
		{"attempts used up", func(p *RetryPlan) { p.Attempt = 3 }, 0, false},
		{"deadline too close", func(p *RetryPlan) { p.Deadline = t0.Add(50 * time.Millisecond) }, 0, false},
		{"reserve needed before deadline", func(p *RetryPlan) { p.Deadline = t0.Add(time.Second); p.Reserve = 950 * time.Millisecond }, 0, false},
		{"no deadline", func(p *RetryPlan) { p.Deadline = time.Time{} }, 100 * time.Millisecond, true},
		{"pluggable backoff", func(p *RetryPlan) {
			p.Backoff = func(attempt int, r float64) time.Duration { return time.Duration(attempt) * 250 * time.Millisecond }
		}, 250 * time.Millisecond, true},
		{"negative pluggable backoff counts as zero", func(p *RetryPlan) {
			p.Backoff = func(int, float64) time.Duration { return -time.Second }
		}, 0, true},
		{"retry-after respected past max", func(p *RetryPlan) { p.RetryAfter = 3 * time.Second }, 3 * time.Second, true},
		{"retry-after past deadline", func(p *RetryPlan) { p.RetryAfter = 30 * time.Second }, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			tc.modify(&q)
			got, ok := NextRetry(q)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("NextRetry = %v, %v want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
