package core

import (
	"math"
	"time"
)

// Backoff returns the delay before retry number attempt (1 for the first
// retry) with full jitter: a draw r in [0, 1) scaled over
// [0, min(max, base·2^(attempt-1))], so r=0 gives no delay and r just under
// 1 gives the whole capped delay. attempt below 1 counts as 1; a
// non-positive base gives 0; a max below base is taken as base.
func Backoff(attempt int, base, max time.Duration, r float64) time.Duration {
	if base <= 0 {
		return 0
	}
	if max < base {
		max = base
	}
	if attempt < 1 {
		attempt = 1
	}
	d := max
	if attempt <= 62 {
		if exp := float64(base) * math.Pow(2, float64(attempt-1)); exp < float64(max) {
			d = time.Duration(exp)
		}
	}
	if r < 0 || math.IsNaN(r) {
		r = 0
	}
	if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	j := time.Duration(r * float64(d+1))
	if j > d {
		j = d
	}
	return j
}

// RetryPlan is the input of NextRetry.
type RetryPlan struct {
	// Attempt is the number of the attempt that just failed (1-based).
	Attempt int
	// MaxAttempts bounds the attempts of this plan.
	MaxAttempts int
	// Base and Max are the backoff's base delay and cap.
	Base, Max time.Duration
	// Now is the current time; Deadline, if not zero, is the time by which
	// the next attempt must have started, with Reserve left over for it.
	Now, Deadline time.Time
	// Reserve is the time an attempt and its completion need before the
	// deadline.
	Reserve time.Duration
	// RetryAfter, if positive, is a least delay asked for by the server.
	RetryAfter time.Duration
	// R is the random draw in [0, 1).
	R float64
	// Backoff, if not nil, replaces the full-jitter Backoff(attempt, Base,
	// Max, r) as the delay of a retry (a pluggable policy: constant,
	// decorrelated jitter, ...). A negative answer counts as 0.
	Backoff BackoffFunc
}

// BackoffFunc is a backoff policy: the delay before retry number attempt (1
// for the first retry), given a random draw r in [0, 1). It must be a pure
// function of its arguments.
type BackoffFunc func(attempt int, r float64) time.Duration

// NextRetry returns the delay before the next attempt and true, or false if
// the attempts are used up or the delay would start the next attempt too
// close to the deadline. A server's RetryAfter raises the delay (even past
// Max: the server's word is respected, or the retry is left to a later
// delivery when the deadline does not allow it).
func NextRetry(p RetryPlan) (time.Duration, bool) {
	if p.Attempt >= p.MaxAttempts {
		return 0, false
	}
	var d time.Duration
	if p.Backoff != nil {
		d = max(p.Backoff(p.Attempt, p.R), 0)
	} else {
		d = Backoff(p.Attempt, p.Base, p.Max, p.R)
	}
	if p.RetryAfter > d {
		d = p.RetryAfter
	}
	if !p.Deadline.IsZero() && p.Now.Add(d+p.Reserve).After(p.Deadline) {
		return 0, false
	}
	return d, true
}
