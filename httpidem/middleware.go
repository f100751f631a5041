package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

// Middleware returns net/http middleware that makes the handlers it wraps
// idempotent per Idempotency-Key header (IETF
// draft-ietf-httpapi-idempotency-key-header-06), for any http.Handler: the
// standard mux, chi (r.Use), gorilla/mux (r.Use), and so on.
//
//   - which requests: those of WithRequiredMethods' methods (default POST
//     and PATCH), which must carry the header (missing: 400), and those of
//     any other method but GET, HEAD, OPTIONS and TRACE that carry one;
//     the rest pass through untouched;
//   - the header (any case; an RFC 8941 quoted string is unquoted) holds 1
//     to MaxKeyLen visible ASCII characters other than a comma, once;
//     invalid or repeated: 400; with WithKeyHeader or WithKeyBodyField the
//     key is that header (a webhook's delivery id) or body field instead
//     (missing: 400 missing-key-source; unusable: 400 invalid-key-source),
//     scoped by WithEndpoint; with WithWebhook, the sender's id, after its
//     signature is verified (401 invalid-signature, before any store call);
//   - the stored key hashes the header with the caller (WithIdentity), so
//     one caller can neither replay nor block another's key;
//   - the fingerprint covers the method, the path (escaped, without the
//     query) and the body (a JSON body compared canonically, only the fields
//     WithFingerprintSelection selects; any other body byte for byte). The body is read whole before the handler runs and
//     given to it again: over WithMaxBodyBytes, 413; JSON nested deeper
//     than MaxBodyDepth, 400;
//   - the same key with another method, path or body: 422; still running
//     elsewhere: 409 with Retry-After (whole seconds until its lease ends,
//     or, answered from the runner's memory of keys in progress, until its
//     next recheck), or with WithWait, its answer once it has one, replayed;
//   - replay: the recorded status, headers (every value: a second
//     Set-Cookie too) and body, plus Idempotent-Replayed: true, after the
//     hook of WithResponseHook;
//   - an answer of 401 or 403 is not recorded, and leaves no record: the
//     reservation is released (core.MarkNoRecord), so the next request with
//     the key runs the handler, and no attempt is counted;
//   - an answer of 500 or more, 408 or 429, and a handler that panics, are
//     not recorded: the key is released as a retryable failure and the
//     client's retry runs the handler again (each such run counts against
//     idem.WithMaxAttempts; once they are used up: 500 retries-exhausted);
//     a panic is re-raised after the failure is recorded;
//   - the handler's answer is held until its outcome is recorded, then
//     sent; if the store refused to commit it and kept nothing
//     (idem.CommitRefused: its staged writes refused as a whole, or a
//     result that could not be kept), 503 commit-refused with
//     Retry-After: 1 is sent in its place, a retryable failure is
//     recorded, and the client's retry runs the handler again;
//   - a streamed answer (the handler flushes, or hijacks the connection)
//     or one whose body is over WithMaxResponseBytes reaches the client as
//     it is written, but is not recorded: the key is recorded as a success
//     without a response, and a retry gets 500 response-not-replayable
//     (marked as replayed) rather than a second run of the handler;
//   - store failures: 503 with Retry-After: 1 when transient, else 500.
//
// The handler's context has a deadline (WithTimeout), from which the
// runner's lease on the key is computed; a runner with
// idem.WithLeaseRenewal holds a shorter lease instead and renews it up to
// that deadline, and cancels the handler's context (cause wrapping
// idem.ErrLeaseLost) if it cannot. Middleware returns an error for a
// nil runner or a bad option; the middleware it returns panics on a nil
// handler, as http.Handle does.
func Middleware(runner *idem.Runner, opts ...Option) (func(http.Handler) http.Handler, error) {
	if runner == nil {
		return nil, errors.New("httpidem: nil runner")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	var err error
	if cfg.keyParts, err = httprule.Keying(cfg.sender, cfg.keyParts, cfg.endpoint, runner.Retention()); err != nil {
		return nil, fmt.Errorf("httpidem: %w", err)
	}
	sel := runner.FingerprintSelection()
	switch {
	case cfg.selSet:
		sel = cfg.selection
	case cfg.sender != nil:
		sel = cfg.sender.Selection()
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httpidem: nil handler")
		}
		return &middleware{runner: runner, cfg: cfg, next: next, sel: sel}
	}, nil
}

// middleware is one wrapped handler. Safe for concurrent use: it is not
// changed after Middleware.
type middleware struct {
	runner *idem.Runner
	cfg    config
	next   http.Handler
	sel    core.Selection // of the body's fingerprint
}

// safe are the methods whose Idempotency-Key is ignored unless required.
var safe = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true, http.MethodTrace: true}

// ServeHTTP takes the key and the payload, runs, and maps the answer.
func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, body, ok := m.admit(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), m.cfg.now().Add(m.cfg.timeout))
	defer cancel()
	rec := newRecorder(w, m.cfg.maxResponse)
	ran := false
	var panicked any
	// The call is logged and observed once, by the runner, with the
	// request and the status answered; the answer is written then: the
	// handler's, once its outcome is recorded, or the middleware's where
	// the handler did not run or its commit was refused.
	actx := idem.WithAnnotation(m.cfg.waitContext(ctx), func(out idem.Outcome, err error) idem.Annotation {
		var a idem.Annotation
		status := rec.status
		switch {
		case panicked != nil:
			a.Verdict, a.Err = idem.Panicked, err
		case !ran, out.Verdict == idem.CommitRefused && rec.discard():
			status, a.Verdict, a.Err = m.answer(r.Context(), w, out, err)
		case httprule.Refused(status):
			rec.send()
			a.Verdict, a.Err = idem.Unauthorized, err
		default:
			rec.send()
		}
		a.Attrs = m.attrs(r, status)
		return a
	})
	path := r.URL.EscapedPath()
	doCtx := idem.ContextWithFingerprint(actx, func(body []byte) (string, error) {
		return httprule.Fingerprint(r.Method, path, body, m.sel)
	})
	_, _ = m.runner.Do(doCtx, key, body, func(ctx context.Context) ([]byte, error) {
		if ran { // not reached: every failure below is marked to retry later
			return nil, core.MarkRetryLater(errors.New("httpidem: handler already ran in this request"))
		}
		ran = true
		hr := r.WithContext(httprule.WithStoredKey(ctx, key))
		hr.Body, hr.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if panicked = serve(m.next, rec, hr); panicked != nil {
			return nil, core.MarkRetryLater(fmt.Errorf("httpidem: handler panicked: %v", panicked))
		}
		return recorded(rec)
	})
	if panicked != nil {
		panic(panicked)
	}
	rec.send() // a no-op once the annotation has answered
}

// unkeyed passes a request without a key through to the handler,
// unprotected, and reports it: idem.Unkeyed, or idem.Panicked when the
// handler panics, whose panic is re-raised. The writer is passed as it is
// (a handler may flush or hijack it), so the status is not known.
func (m *middleware) unkeyed(w http.ResponseWriter, r *http.Request) {
	ctx := idem.WithAnnotation(r.Context(), m.annotation(r, 0))
	if p := serve(m.next, w, r); p != nil {
		m.runner.Report(ctx, "", idem.Outcome{Verdict: idem.Panicked}, fmt.Errorf("httpidem: handler panicked: %v", p))
		panic(p)
	}
	m.runner.Report(ctx, "", idem.Outcome{Verdict: idem.Unkeyed}, nil)
}

// serve runs h, returning what it panicked with, if anything.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (panicked any) {
	defer func() { panicked = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

// recorded is the outcome to store for the handler's answer.
func recorded(rec *recorder) ([]byte, error) {
	status := rec.finish()
	if err := httprule.Unstored(status); err != nil {
		return nil, err
	}
	switch {
	case rec.omitted:
		return httprule.EncodeOmitted(shape), nil
	}
	return httprule.Encode(shape, storedResponse{Response: Response{StatusCode: status, Header: rec.header, Body: rec.body.Bytes()}, HandlerCookies: true})
}

// storedResponse is a Response as the middleware stores it: HandlerCookies
// marks a response whose Set-Cookie values are all the handler's own (the
// recorder keeps no other). A response recorded by a release before the
// mark may hold an outer middleware's cookie beside the handler's (a
// session): its cookies are not replayed.
type storedResponse struct {
	Response
	HandlerCookies bool `json:"handlerCookies,omitempty"`
}

// admit takes the stored key and the body of a request. ok is false when
// admit has answered the request itself (400, 413) or passed it through
// unkeyed: a safe method (GET, HEAD, OPTIONS, TRACE) without a requirement
// silently, as none of idem's business; another method without a key and
// without a requirement, reported as idem.Unkeyed.
func (m *middleware) admit(w http.ResponseWriter, r *http.Request) (key string, body []byte, ok bool) {
	if !m.cfg.required[r.Method] && safe[r.Method] {
		m.next.ServeHTTP(w, r)
		return "", nil, false
	}
	read := m.cfg.sender != nil || httprule.NeedsBody(m.cfg.keyParts)
	var err error
	if read {
		if body, err = m.readBody(r); err != nil {
			return "", nil, m.refuse(w, r, bodyAnswer(err), "", err)
		}
	}
	if s := m.cfg.sender; s != nil {
		if err := s.Verify(r.Header.Values, body, m.cfg.now()); err != nil {
			return "", nil, m.refuse(w, r, httprule.NewAnswer(httprule.InvalidSignature, err.Error(), idem.Unauthorized), "", err)
		}
	}
	rk, err := httprule.FindKey(m.cfg.keyParts, m.cfg.endpoint, nil, r.Header, body)
	switch {
	case !m.cfg.required[r.Method] && errors.Is(err, httprule.ErrNoKey):
		if read {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		m.unkeyed(w, r)
		return "", nil, false
	case err != nil:
		return "", nil, m.refuse(w, r, httprule.KeyAnswer(m.cfg.keyParts, err), "", err)
	}
	var identity []string
	if m.cfg.identity != nil {
		if id := m.cfg.identity(r); id != "" {
			identity = []string{"caller=" + id}
		}
	}
	if key, err = rk.Stored(identity); err != nil {
		return "", nil, m.refuse(w, r, httprule.KeyAnswer(m.cfg.keyParts, err), "", err)
	}
	if !read {
		if body, err = m.readBody(r); err != nil {
			return "", nil, m.refuse(w, r, bodyAnswer(err), key, err)
		}
	}
	return key, body, true
}

// bodyAnswer is the answer to a request whose body readBody refused.
func bodyAnswer(err error) httprule.Answer {
	if errors.Is(err, errTooLarge) {
		return httprule.NewAnswer(httprule.BodyTooLarge, err.Error(), idem.InvalidPayload)
	}
	return httprule.NewAnswer(httprule.InvalidBody, err.Error(), idem.InvalidPayload)
}

// errTooLarge is readBody's error for a body over the limit.
var errTooLarge = errors.New("httpidem: request body too large")

// readBody reads the request's body whole, up to the limit.
func (m *middleware) readBody(r *http.Request) ([]byte, error) {
	limit := m.cfg.maxBody
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errTooLarge, r.ContentLength, limit)
	}
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, mbe.Limit)
	case int64(len(b)) > limit:
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: the request body could not be read: %v", core.ErrInvalidPayload, err)
	}
	return b, nil
}

// refuse answers a request that could not be keyed, or whose body is not
// usable, and reports its verdict (the answer's); false.
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, a httprule.Answer, key string, err error) bool {
	status := m.write(r.Context(), w, answerResponse(a), a.Verdict, false)
	m.runner.Report(idem.WithAnnotation(r.Context(), m.annotation(r, status)), key, idem.Outcome{Verdict: a.Verdict}, err)
	return false
}

// answer writes the answer to a call whose handler did not run in this
// request: the replay, or a problem. It returns the status, the verdict the
// answer amounts to when it is not the call's (a replay that cannot be
// answered: idem.ReplayOmitted, idem.ReplayCorrupt; else
// idem.VerdictUnknown) and the error to log.
func (m *middleware) answer(ctx context.Context, w http.ResponseWriter, out idem.Outcome, err error) (int, idem.Verdict, error) {
	if out.Verdict != idem.Replayed {
		a := httprule.Refusal(out.Verdict, err, m.cfg.now(), m.cfg.keyParts)
		return m.write(ctx, w, answerResponse(a), a.Verdict, false), idem.VerdictUnknown, err
	}
	if out.ResultOmitted {
		return m.write(ctx, w, answerResponse(httprule.Omitted()), idem.ReplayOmitted, true), idem.ReplayOmitted, errResponseOmitted
	}
	st, err := httprule.Decode(out.Result)
	var resp storedResponse
	switch {
	case err != nil:
	case st.Omitted:
		return m.write(ctx, w, answerResponse(httprule.Omitted()), idem.ReplayOmitted, true), idem.ReplayOmitted, errResponseOmitted
	case st.Shape != shape:
		err = fmt.Errorf("%w: a %q response, not one this middleware stored", httprule.ErrStoredFormat, st.Shape)
	default:
		if uerr := json.Unmarshal(st.Response, &resp); uerr != nil {
			err = fmt.Errorf("%w: %v", httprule.ErrStoredFormat, uerr)
		}
	}
	if err != nil {
		return m.write(ctx, w, answerResponse(httprule.NewAnswer(httprule.Internal, "", idem.ReplayCorrupt)), idem.ReplayCorrupt, false), idem.ReplayCorrupt, err
	}
	if !resp.HandlerCookies {
		for k := range resp.Header {
			if http.CanonicalHeaderKey(k) == setCookie {
				delete(resp.Header, k)
			}
		}
	}
	return m.write(ctx, w, resp.Response, idem.Replayed, true), idem.VerdictUnknown, nil
}

// errResponseOmitted explains idem.ReplayOmitted in a log record.
var errResponseOmitted = errors.New("httpidem: the recorded response was not kept (too large, or streamed): answered 500 response-not-replayable")
