package ddbstore

import (
	"testing"
	"time"

	"github.com/idemgo/idem/core"
)

// TestRequestToken: the commit's ClientRequestToken fits DynamoDB's 36
// characters, is the same for a retried commit, and differs for another
// lease, attempt, or try of the same reservation (another outcome time).
func TestRequestToken(t *testing.T) {
	t.Parallel()
	rec := core.Record{Key: "k", LeaseToken: "0123456789abcdef0123456789abcdef0123456789", Attempts: 3, UpdatedAt: time.Unix(1_900_000_000, 0)}
	tok := requestToken(rec)
	if len(tok) < 1 || len(tok) > 36 {
		t.Fatalf("requestToken = %q (%d characters), want 1 to 36", tok, len(tok))
	}
	if again := requestToken(rec); again != tok {
		t.Fatalf("requestToken of the same commit = %q then %q, want equal", tok, again)
	}
	other := rec
	other.Attempts++
	lease := rec
	lease.LeaseToken = "another"
	try := rec
	try.UpdatedAt = rec.UpdatedAt.Add(time.Millisecond)
	for name, r := range map[string]core.Record{"another attempt": other, "another lease": lease, "another try": try} {
		if requestToken(r) == tok {
			t.Errorf("%s: requestToken = %q, the same as the first commit's", name, tok)
		}
	}
}
