package sim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
)

// newResult draws the result of a successful try: a few bytes, or
// (Service.Large) 1 KB to 32 KB or 32 KB to 600 KB (as often) of
// incompressible bytes, made from the seed and the try: results a store
// may keep beside its record (the DynamoDB store's result items) and, past
// an item's limit, in its blob store.
func (s *simulation) newResult(sv *service, id int64) []byte {
	if !s.chance(sv.Large) {
		return []byte("r" + strconv.FormatInt(id, 10))
	}
	n := 32<<10 + s.rng.IntN(568<<10)
	if s.chance(0.5) {
		n = 1<<10 + s.rng.IntN(31<<10)
	}
	b := make([]byte, n&^7)
	r := rand.New(rand.NewPCG(s.cfg.Seed, uint64(id)))
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

// resultKey names a result: itself if short, else its size and digest.
func resultKey(b []byte) string {
	if len(b) <= 64 {
		return string(b)
	}
	h := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes sha256:%x", len(b), h[:8])
}

// mayOmit reports whether the store may omit a result of n bytes.
func (s *simulation) mayOmit(n int) bool { return s.cfg.OmitAbove > 0 && n > s.cfg.OmitAbove }

// keeps describes the results the store keeps.
func (s *simulation) keeps() string {
	if s.cfg.OmitAbove == 0 {
		return "every result"
	}
	return fmt.Sprintf("results of up to %d bytes", s.cfg.OmitAbove)
}

// faultBlob is the blob store of a store that keeps large results
// (Config.NewStoreBlob): every call parks its caller for two legs, and may
// be throttled, time out, or (a Put) lose its answer after it was applied.
type faultBlob struct {
	s     *simulation
	inner blob.Store
}

var _ blob.Store = (*faultBlob)(nil)

// blobRule is the rule of a blob call made by the current actor, or nil
// when the operator (on the scheduler) makes it: no legs, no faults.
func (b *faultBlob) blobRule() *legRule {
	s := b.s
	if s.operating {
		return nil
	}
	a := s.cur
	if a.rn != nil {
		return a.rn.rule()
	}
	return &legRule{a: a, call: a.t.cur, until: never}
}

func (b *faultBlob) Put(ctx context.Context, name string, data []byte) error {
	r := b.blobRule()
	if r == nil {
		return b.inner.Put(ctx, name, data)
	}
	_, err := faultCall(b.s, r, "blob-put", true, func(ictx context.Context) (struct{}, error) {
		return struct{}{}, b.inner.Put(ictx, name, data)
	}, b.count)
	return err
}

func (b *faultBlob) Get(ctx context.Context, name string) ([]byte, error) {
	r := b.blobRule()
	if r == nil {
		return b.inner.Get(ctx, name)
	}
	return faultCall(b.s, r, "blob-get", false, func(ictx context.Context) ([]byte, error) { return b.inner.Get(ictx, name) }, nil)
}

// GetLimited is Get bounded as the inner store bounds it
// (blob.LimitedGetter, which the store reads large results with), with the
// same faults.
func (b *faultBlob) GetLimited(ctx context.Context, name string, max int64) ([]byte, error) {
	get := func(ictx context.Context) ([]byte, error) {
		if lg, ok := b.inner.(blob.LimitedGetter); ok {
			return lg.GetLimited(ictx, name, max)
		}
		return b.inner.Get(ictx, name)
	}
	r := b.blobRule()
	if r == nil {
		return get(ctx)
	}
	return faultCall(b.s, r, "blob-get", false, get, nil)
}

// count counts a blob write's lost answer among the blob store's faults.
func (b *faultBlob) count(_ struct{}, _ error, lost bool) {
	if lost {
		b.s.stats.BlobFaults++
	}
}

// countLarge counts a recorded success whose result is large (newResult:
// 1 KB or more).
func (s *simulation) countLarge(rec core.Record) {
	if len(rec.Result) >= 1<<10 {
		s.stats.LargeResults++
	}
}
