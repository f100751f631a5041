package core

import "time"

// Renew returns rec with its lease extended to until, written at now: the
// lease ends at until, and retention at the later of rec.ExpiresAt and until
// (the rule Reserve applies: a store that deletes expired records by itself
// must never delete a record whose lease lives). A zero ExpiresAt (never
// expires) stays zero. Only LeaseUntil, ExpiresAt and UpdatedAt change. A
// store writes these three fields of Renew(rec, until, now) when Renewable
// holds (see idem.LeaseRenewer).
func Renew(rec Record, until, now time.Time) Record {
	rec.LeaseUntil = until
	if !rec.ExpiresAt.IsZero() && rec.ExpiresAt.Before(until) {
		rec.ExpiresAt = until
	}
	rec.UpdatedAt = now
	return rec
}

// Renewable is the rule of lease renewal: the holder of token may extend the
// lease of the stored record at now if and only if stored is in progress
// under token and its lease has not ended at now. A lease that has ended is
// not renewed even if no one took it over yet: from its end on, another
// caller may be taking it over, and the holder has stopped (its handler's
// context is cancelled when its lease can no longer be held). A live lease
// implies the record is not Expired. memstore applies this function;
// ddbstore's condition expression and redisstore's script are its
// translations and are tested against it.
func Renewable(stored Record, token string, now time.Time) bool {
	return stored.Status == StatusInProgress && stored.LeaseToken == token && !stored.LeaseExpired(now)
}

// Renewed reports whether stored already holds token's lease until at least
// until: a renewal retried after its answer was lost, or one that would
// shorten the lease. A store answers it with the stored record and writes
// nothing, so that a lease never gets shorter. (With until after the
// renewal's time, as stores require, such a lease is live.)
func Renewed(stored Record, token string, until time.Time) bool {
	return stored.Status == StatusInProgress && stored.LeaseToken == token && !stored.LeaseUntil.Before(until)
}
