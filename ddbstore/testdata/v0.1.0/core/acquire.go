package core

import "time"

// Acquirable is the rule of a one-write reservation: it reports whether a
// call with fingerprint fp may replace stored (nil if there is none) at now
// under policy p, without a decision made first. It holds exactly when
// Decide would answer Execute for a valid key: the record is absent or
// Expired, or it has the same fingerprint, fewer than p's attempts, and is
// either in progress with a lease that ended by now or a retryable failure.
// A store that acquires a key in one conditional write (idem.Acquirer)
// applies this rule; ddbstore's condition expression is its translation and
// is tested against it.
func Acquirable(stored *Record, fp string, now time.Time, p Policy) bool {
	if stored == nil || stored.Expired(now) {
		return true
	}
	if stored.Fingerprint != fp || stored.Attempts >= p.maxAttempts() {
		return false
	}
	return stored.Status == StatusInProgress && stored.LeaseExpired(now) ||
		stored.Status == StatusFailed && stored.Retryable
}

// Acquire returns rec, an in-progress record as Reserve makes it, with the
// attempt number it has once written over stored at now: one more than
// stored's when stored is live (not Expired: an expired lease taken over or
// a retryable failure re-run, which Acquirable allows), 1 when there is no
// live record. The count is the same one Reserve gives with stored as prev.
// It carries stored's steps when rec continues stored's execution (a
// takeover or a retry of the same payload; see Step) and has none otherwise.
func Acquire(rec Record, stored *Record, now time.Time) Record {
	rec.Steps = carriedSteps(stored, rec.Fingerprint, now)
	rec.Attempts = 1
	if stored != nil && !stored.Expired(now) {
		rec.Attempts = stored.Attempts + 1
	}
	return rec
}

// Acquired reports whether stored is the reservation rec itself, made by
// an earlier try of a one-write reservation whose answer was lost: same
// key and lease token, in progress. Unlike SameWrite it ignores the
// attempt, which the store, not the caller, counted. Lease tokens are
// unique per reservation, so no other writer's record matches.
func Acquired(stored, rec Record) bool {
	return stored.Key == rec.Key && stored.LeaseToken == rec.LeaseToken && stored.Status == StatusInProgress
}

// AttemptLimit returns the largest number of executions p allows for one
// key: MaxAttempts, or 1 when it is below 1.
func (p Policy) AttemptLimit() int { return p.maxAttempts() }
