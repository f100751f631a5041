// Package webhooktest signs webhook deliveries in tests as each sender's
// documentation says it signs them, apart from package webhook (so that a
// test of the wrappers checks the package against the senders' algorithms,
// not against itself), and counts a store's calls.
package webhooktest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// StripeSignature is a Stripe-Signature value: t, then a v1 per secret,
// the hex HMAC-SHA256 of "<t>.<body>".
func StripeSignature(t int64, body string, secrets ...string) string {
	h := fmt.Sprintf("t=%d", t)
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write([]byte(fmt.Sprintf("%d.%s", t, body)))
		h += ",v1=" + hex.EncodeToString(mac.Sum(nil))
	}
	return h
}

// GitHubSignature is an X-Hub-Signature-256 value: "sha256=" and the hex
// HMAC-SHA256 of body.
func GitHubSignature(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// ShopifySignature is an X-Shopify-Hmac-Sha256 value: the base64
// HMAC-SHA256 of body.
func ShopifySignature(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// CountedStore is a memstore that counts the calls of its reads and
// reservations (Calls): a request refused before the store sees none.
type CountedStore struct {
	*memstore.Store
	calls atomic.Int32
}

// NewCountedStore returns an empty CountedStore.
func NewCountedStore() *CountedStore { return &CountedStore{Store: memstore.New()} }

// Calls returns the calls of Reserve, Acquire and Get so far.
func (s *CountedStore) Calls() int { return int(s.calls.Load()) }

// Reserve counts and calls memstore's.
func (s *CountedStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.calls.Add(1)
	return s.Store.Reserve(ctx, rec, prev, now)
}

// Acquire counts and calls memstore's.
func (s *CountedStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	s.calls.Add(1)
	return s.Store.Acquire(ctx, rec, now, p)
}

// Get counts and calls memstore's.
func (s *CountedStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, key, now)
}
