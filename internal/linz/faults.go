package linz

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing/iotest"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/internal/fakeaws"
	"github.com/idemgo/idem/storetest"
)

// Rates are the chances, each in [0, 1), that a request gets a fault of
// the fault kit (storetest.Fault); their sum must be below 1.
type Rates struct {
	// FailBefore: the request is refused before it is sent.
	FailBefore float64
	// AnswerLost: a write is applied and its answer lost (for a read:
	// the read fails).
	AnswerLost float64
	// Throttled: the server refuses the request for capacity.
	Throttled float64
	// TimedOut: the request times out unapplied.
	TimedOut float64
}

// DefaultRates are the rates of the checks in make test: one request in
// twelve or so fails, a third of those after the write was applied.
var DefaultRates = Rates{FailBefore: 0.02, AnswerLost: 0.03, Throttled: 0.02, TimedOut: 0.01}

// Faults draws the fault of each request of a store at random with fixed
// rates, from a seeded source, in storetest's vocabulary (a
// storetest.Faults scripts them instead). A nil *Faults injects nothing.
// Safe for concurrent use (mu guards rng and counts).
type Faults struct {
	rates Rates

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[storetest.Fault]int
}

// NewFaults returns a source of faults at rates r, seeded with seed.
func NewFaults(seed uint64, r Rates) *Faults {
	return &Faults{rates: r, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), counts: map[storetest.Fault]int{}}
}

// Next returns the fault of the next request of kind op (a read never
// loses an applied answer: it fails like a timeout).
func (f *Faults) Next(op storetest.Op) storetest.Fault {
	if f == nil {
		return storetest.NoFault
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.rng.Float64()
	fault := storetest.NoFault
	for _, c := range []struct {
		p float64
		f storetest.Fault
	}{{f.rates.FailBefore, storetest.FailBefore}, {f.rates.AnswerLost, storetest.AnswerLost},
		{f.rates.Throttled, storetest.Throttled}, {f.rates.TimedOut, storetest.TimedOut}} {
		if x < c.p {
			fault = c.f
			break
		}
		x -= c.p
	}
	if fault == storetest.AnswerLost && op == storetest.Read {
		fault = storetest.TimedOut
	}
	f.counts[fault]++
	return fault
}

// Counts returns how many requests got each fault so far (NoFault
// included).
func (f *Faults) Counts() map[storetest.Fault]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[storetest.Fault]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// cut reports whether the answer of a request that got a lost answer or a
// throttle comes cut short (its body ends early, at whatever status) rather
// than not at all, or whole: half of them, drawn from the seeded source.
func (f *Faults) cut() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(2) == 0
}

// faultError is the network error a client meets for fault: a refused
// connection, or a read that timed out (the answer lost, or never sent),
// or with cut, a reply whose connection closed before its end.
func faultError(fault storetest.Fault, cut bool) error {
	switch {
	case fault == storetest.FailBefore:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case cut:
		return io.ErrUnexpectedEOF
	}
	return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// Transport is an http.RoundTripper for a DynamoDB client that injects
// Faults into the data-plane requests (GetItem and BatchGetItem reads;
// PutItem, UpdateItem, DeleteItem and TransactWriteItems writes), as DynamoDB and the network
// answer them: a refused connection, HTTP 400
// ProvisionedThroughputExceededException (fakeaws.DynamoDBError), whole or
// with its body cut short, a read timeout before the request is sent, or
// the request sent and answered and its answer replaced by a read timeout
// or cut short (the server's status and headers, then half its body).
// Other requests (CreateTable) pass.
type Transport struct {
	Inner  http.RoundTripper
	Faults *Faults
}

// dynamoOps are the kinds of the DynamoDB requests that get faults.
var dynamoOps = map[string]storetest.Op{"GetItem": storetest.Read, "BatchGetItem": storetest.Read, "PutItem": storetest.Write,
	"UpdateItem": storetest.Write, "DeleteItem": storetest.Write, "TransactWriteItems": storetest.Write}

// RoundTrip sends req, or fails it as the fault drawn for it says.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	name := req.Header.Get("X-Amz-Target")
	name = name[strings.LastIndexByte(name, '.')+1:]
	op, ok := dynamoOps[name]
	if !ok {
		return t.Inner.RoundTrip(req)
	}
	switch fault := t.Faults.Next(op); fault {
	case storetest.NoFault:
		return t.Inner.RoundTrip(req)
	case storetest.Throttled:
		drain(req)
		resp := answer(req, fakeaws.DynamoDBError(400, "ProvisionedThroughputExceededException", "linz: injected throttle"))
		if t.Faults.cut() {
			cutShort(resp)
		}
		return resp, nil
	case storetest.AnswerLost:
		resp, err := t.Inner.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if t.Faults.cut() {
			cutShort(resp)
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, faultError(fault, false)
	default:
		drain(req)
		return nil, faultError(fault, false)
	}
}

// cutShort makes resp's body end halfway with the error net/http reports
// for a connection closed before the Content-Length was read.
func cutShort(resp *http.Response) {
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.ContentLength = int64(len(body))
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), iotest.ErrReader(io.ErrUnexpectedEOF)))
}

func drain(req *http.Request) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
}

// answer returns the response h writes to req.
func answer(req *http.Request, h http.Handler) *http.Response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	resp.Request = req
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

// RedisHook is a go-redis hook that injects Faults into the store's
// scripts (every EVALSHA and EVAL: the store sends nothing else), as the
// network does to a Redis client: a refused connection (for FailBefore, and
// for Throttled, since Redis does not throttle), a read timeout before the
// command is sent, or the command run and its answer replaced by a read
// timeout or cut short (an unexpected EOF, as go-redis reads a reply whose
// connection closed before its end). Give the client MaxRetries -1, or it retries on its own.
type RedisHook struct{ Faults *Faults }

// DialHook passes dials through.
func (h RedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook passes pipelines through (the store pipelines only
// with WithWait, which the checks do not use).
func (h RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook injects the fault drawn for each script call.
func (h RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		fault := h.Faults.Next(storetest.Write)
		switch fault {
		case storetest.NoFault:
			return next(ctx, cmd)
		case storetest.AnswerLost:
			if err := next(ctx, cmd); err != nil {
				return err
			}
		case storetest.Throttled:
			fault = storetest.FailBefore
		}
		err := faultError(fault, fault == storetest.AnswerLost && h.Faults.cut())
		cmd.SetErr(err)
		return err
	}
}
