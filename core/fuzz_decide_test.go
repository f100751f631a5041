package core

import (
	"testing"
	"time"
)

// FuzzDecide checks that Decide never panics, replays only a live record
// with a matching fingerprint (and executes nothing but what the table
// allows, never past the policy's bound, NoAttemptLimit included).
func FuzzDecide(f *testing.F) {
	f.Add("evt:order-1:charge", "in_progress", "fa", "fa", int64(10), int64(30), int64(3600), 1, true, 3, true)
	f.Add("evt:order-1:charge", "succeeded", "fa", "fb", int64(10), int64(0), int64(3600), 2, false, 3, true)
	f.Add("bad", "failed", "fa", "fa", int64(10), int64(0), int64(5), 3, true, 3, false)
	f.Add("evt:order-1:charge", "failed", "fa", "fa", int64(10), int64(0), int64(3600), 1_000_000, true, NoAttemptLimit, true)
	f.Fuzz(func(t *testing.T, key, status, storedFP, fp string, nowSec, leaseSec, expSec int64, attempts int, retryable bool, maxAttempts int, hasRec bool) {
		now := t0.Add(time.Duration(nowSec%1e6) * time.Second)
		var rec *Record
		if hasRec {
			rec = &Record{Key: key, Fingerprint: storedFP, Status: Status(status), Attempts: attempts, Retryable: retryable,
				LeaseUntil: t0.Add(time.Duration(leaseSec%1e6) * time.Second), ExpiresAt: t0.Add(time.Duration(expSec%1e6) * time.Second)}
		}
		d := Decide(key, rec, fp, now, Policy{MaxAttempts: maxAttempts})
		if ValidateKey(key) != nil {
			if d.Action != Reject {
				t.Fatalf("invalid key %q got %v", key, d.Action)
			}
			return
		}
		live := rec != nil && !rec.Expired(now)
		switch d.Action {
		case Replay:
			if !live || rec.Fingerprint != fp || (rec.Status != StatusSucceeded && (rec.Status != StatusFailed || rec.Retryable)) {
				t.Fatalf("replayed %v for fingerprint %q at %v", rec, fp, now)
			}
		case Execute:
			if live && (rec.Fingerprint != fp || rec.Status == StatusSucceeded) {
				t.Fatalf("executed over %v for fingerprint %q", rec, fp)
			}
			if live && rec.Status == StatusInProgress && !rec.LeaseExpired(now) {
				t.Fatalf("executed over a live lease %v", rec)
			}
			if live && rec.Attempts >= max(maxAttempts, 1) {
				t.Fatalf("executed over %v with its %d attempts allowed used up", rec, maxAttempts)
			}
		case InProgress:
			if !live || rec.Status != StatusInProgress {
				t.Fatalf("in progress without a live in-progress record: %v", rec)
			}
		case Reject:
			if d.Err == nil {
				t.Fatal("reject without an error")
			}
		default:
			t.Fatalf("unknown action %v", d.Action)
		}
	})
}
