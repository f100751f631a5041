package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

// httpWrapper is the machinery of the HTTP wrappers, over one event
// source's request and response types. Safe for concurrent use: it is not
// changed after newHTTPWrapper.
type httpWrapper[Req, Resp any] struct {
	runner  *idem.Runner
	cfg     config
	fl      flavour[Req, Resp]
	handler func(context.Context, Req) (Resp, error)
	hook    func(context.Context, *Resp, idem.Verdict) // nil: none
	sel     core.Selection                             // of the body's fingerprint
}

func newHTTPWrapper[Req, Resp any](runner *idem.Runner, handler func(context.Context, Req) (Resp, error), fl flavour[Req, Resp], opts []HTTPOption) (func(context.Context, Req) (Resp, error), error) {
	if runner == nil {
		return nil, errors.New("idemlambda: nil runner")
	}
	if handler == nil {
		return nil, errors.New("idemlambda: nil handler")
	}
	cfg, err := configure(opts, HTTPOption.applyHTTP)
	if err != nil {
		return nil, err
	}
	if cfg.keyParts, err = httprule.Keying(cfg.sender, cfg.keyParts, cfg.endpoint, runner.Retention()); err != nil {
		return nil, fmt.Errorf("idemlambda: %s: %w", fl.name, err)
	}
	if cfg.sender != nil && !cfg.selectionSet {
		cfg.selection, cfg.selectionSet = cfg.sender.Selection(), true
	}
	w := &httpWrapper[Req, Resp]{runner: runner, cfg: cfg, fl: fl, handler: handler, sel: cfg.selectionFor(runner)}
	if cfg.hook != nil {
		hook, ok := cfg.hook.fn.(func(context.Context, *Resp, idem.Verdict))
		if !ok {
			var zero Resp
			return nil, fmt.Errorf("idemlambda: %s answers %T, but WithResponseHook was given a hook for %s", fl.name, zero, cfg.hook.typ)
		}
		w.hook = hook
	}
	return w.serve, nil
}

// serve is the wrapper: take the key and the payload, run, map the answer.
// The call is logged and observed once, by the runner, with the request
// and the status answered (annotate). The handler's own response is the
// answer when it ran, unless its commit was refused (idem.CommitRefused).
func (w *httpWrapper[Req, Resp]) serve(ctx context.Context, event Req) (Resp, error) {
	req := w.request(ctx, event)
	ctx = withTenant(ctx, lambdaTenant(ctx))
	key, body, early := w.admit(ctx, req, event)
	if early != nil {
		return *early, nil
	}
	defer reportPanic(idem.WithAnnotation(ctx, w.annotation(req, 0)), w.runner, key)
	var fresh *Resp  // the response of this call's own execution, if any
	var failed error // the handler's error, answered with a problem
	var answered Resp
	actx := idem.WithAnnotation(ctx, func(out idem.Outcome, err error) idem.Annotation {
		if fresh != nil && out.Verdict == idem.CommitRefused {
			// The handler's answer describes an outcome the store kept
			// nothing of: a 503, so that the client's retry runs again.
			fresh = nil
		}
		if fresh != nil {
			// The handler ran in this call: its response is the truth,
			// whether or not its outcome could be recorded (but for a
			// commit refused, above).
			status := w.fl.view(*fresh).StatusCode
			a := idem.Annotation{Attrs: w.attrs(req, status)}
			if failed != nil {
				a.Attrs = append(a.Attrs, slog.String("handler_error", failed.Error()))
			}
			if failed == nil && httprule.Refused(status) {
				a.Verdict, a.Err = idem.Unauthorized, err
			}
			return a
		}
		var v idem.Verdict
		answered, v, err = w.answer(ctx, req, out, err)
		return idem.Annotation{Attrs: w.attrs(req, w.fl.view(answered).StatusCode), Verdict: v, Err: err}
	})
	out, _ := w.runner.Do(w.doContext(actx, req), key, body, func(ctx context.Context) ([]byte, error) {
		resp, status, herr := w.run(withStoredKey(ctx, key), req, event)
		fresh, failed = &resp, herr
		if herr != nil {
			return nil, httprule.RetryLater(status)
		}
		if err := httprule.Unstored(status); err != nil {
			return nil, err
		}
		b, merr := httprule.Encode(req.shape, resp)
		if merr != nil { // the AWS response types always marshal
			return nil, core.MarkRetryLater(merr)
		}
		return b, nil
	})
	if fresh != nil {
		if failed != nil {
			w.callHook(ctx, fresh, out.Verdict)
		}
		return *fresh, nil
	}
	return answered, nil
}

// request is the event's view, with the identity header of
// WithIdentityHeader added to the caller identity.
func (w *httpWrapper[Req, Resp]) request(ctx context.Context, event Req) httpRequest {
	return w.cfg.withIdentityHeader(w.fl.request(ctx, event))
}

// withIdentityHeader returns req with the identity header of
// WithIdentityHeader added to its caller identity.
func (c *config) withIdentityHeader(req httpRequest) httpRequest {
	if name := c.identityHeader; name != "" {
		var vals []string
		for k, vs := range req.multi {
			if strings.EqualFold(k, name) {
				vals = append(vals, vs...)
			}
		}
		for k, v := range req.headers {
			if len(vals) == 0 && strings.EqualFold(k, name) {
				vals = append(vals, v)
			}
		}
		c := caller{parts: req.identity}
		c.addString("header:"+strings.ToLower(name), strings.Join(vals, ","))
		req.identity = c.parts
	}
	return req
}

// run runs the handler: its response, with a StatusCode of 0 made 200, or
// for an error a 500 problem; and the status answered.
func (w *httpWrapper[Req, Resp]) run(ctx context.Context, req httpRequest, event Req) (Resp, int, error) {
	resp, herr := w.handler(ctx, event)
	if herr != nil {
		a := httprule.NewAnswer(httprule.Internal, "", idem.FailedTransiently)
		return w.fl.native(answerView(a, req.multiAnswer)), a.Status, herr
	}
	v := w.fl.view(resp)
	if v.StatusCode == 0 {
		v.StatusCode = http.StatusOK
		resp = w.fl.native(v)
	}
	return resp, v.StatusCode, nil
}

// admit takes the stored key and the body of a request. When the request
// cannot be keyed, early is the answer: a 400, or the handler's own answer
// when it ran unkeyed (WithOptionalKey).
func (w *httpWrapper[Req, Resp]) admit(ctx context.Context, req httpRequest, event Req) (key string, body []byte, early *Resp) {
	decode := func() (err error) {
		if body == nil {
			body, err = DecodeBody(req.body, req.base64)
		}
		return err
	}
	invalidBody := func(err error) *Resp {
		return w.refuse(ctx, req, httprule.NewAnswer(httprule.InvalidBody, err.Error(), idem.InvalidPayload), key, err)
	}
	if w.cfg.sender != nil || httprule.NeedsBody(w.cfg.keyParts) {
		if err := decode(); err != nil {
			return "", nil, invalidBody(err)
		}
	}
	if s := w.cfg.sender; s != nil {
		values := func(name string) []string { return httprule.HeaderValues(req.headers, req.multi, name) }
		if err := s.Verify(values, body, w.cfg.now()); err != nil {
			return "", nil, w.refuse(ctx, req, httprule.NewAnswer(httprule.InvalidSignature, err.Error(), idem.Unauthorized), "", err)
		}
	}
	key, err := w.cfg.requestKey(ctx, req, body)
	switch {
	case errors.Is(err, ErrUnidentifiedCaller):
		return "", nil, w.refuse(ctx, req, httprule.NewAnswer(httprule.Internal, unidentifiedDetail, idem.InvalidKey), "", err)
	case errors.Is(err, httprule.ErrNoKey) && w.cfg.optionalKey:
		return "", nil, w.unkeyed(ctx, req, event)
	case err != nil:
		return "", nil, w.refuse(ctx, req, httprule.KeyAnswer(w.cfg.keyParts, err), "", err)
	}
	if err := decode(); err != nil {
		return "", nil, invalidBody(err)
	}
	return key, body, nil
}

// requestKey returns the stored key of req, whose body (decoded where a
// key source needs it) is body: its key sources' values (FindKey: by
// default the Idempotency-Key header), hashed with the caller identity and
// scoped by the invocation's tenant (ctx). The error wraps httprule.ErrNoKey
// or core.ErrInvalidKey, or, for a caller an authorizer let through that the
// request does not identify, ErrUnidentifiedCaller.
func (c *config) requestKey(ctx context.Context, req httpRequest, body []byte) (string, error) {
	rk, err := httprule.FindKey(c.keyParts, c.endpoint, req.headers, req.multi, body)
	if err != nil {
		return "", err
	}
	if req.unidentified != nil {
		return "", req.unidentified
	}
	key, err := rk.Stored(req.identity)
	if err != nil {
		return "", err
	}
	key, _, err = tenantScoped(ctx, key)
	return key, err
}

// unidentifiedDetail is the problem's detail for a caller an authorizer let
// through that the wrapper cannot identify (ErrUnidentifiedCaller): the
// cause is the server's configuration, which the log record names.
const unidentifiedDetail = "The caller of this request cannot be identified, so its idempotency key cannot be kept apart from other callers' keys; it was not run."

// unkeyed runs the handler for a request without a key, let through
// unprotected (WithOptionalKey), and reports it: idem.Unkeyed, or
// idem.Panicked when the handler panics, whose panic goes on to the
// runtime.
func (w *httpWrapper[Req, Resp]) unkeyed(ctx context.Context, req httpRequest, event Req) *Resp {
	defer reportPanic(idem.WithAnnotation(ctx, w.annotation(req, 0)), w.runner, "")
	resp, status, herr := w.run(ctx, req, event)
	if herr != nil {
		w.callHook(ctx, &resp, idem.Unkeyed)
	}
	w.runner.Report(idem.WithAnnotation(ctx, w.annotation(req, status)), "", idem.Outcome{Verdict: idem.Unkeyed}, herr)
	return &resp
}

// doContext is the context of the runner's call for req: the wait of
// WithWait, and the request's fingerprint (httprule.Fingerprint: the method,
// the path and the body, under the wrapper's selection).
func (w *httpWrapper[Req, Resp]) doContext(ctx context.Context, req httpRequest) context.Context {
	return idem.ContextWithFingerprint(w.cfg.waitContext(ctx), func(body []byte) (string, error) {
		return httprule.Fingerprint(req.method, req.path, body, w.sel)
	})
}

// refuse answers a request that could not be keyed or whose body is not
// usable, and reports its verdict (the answer's).
func (w *httpWrapper[Req, Resp]) refuse(ctx context.Context, req httpRequest, a httprule.Answer, key string, err error) *Resp {
	resp := w.own(ctx, req, a)
	w.runner.Report(idem.WithAnnotation(ctx, w.annotation(req, a.Status)), key, idem.Outcome{Verdict: a.Verdict}, err)
	return &resp
}

// answer maps the runner's answer, for a call whose handler did not run in
// it, to the response (the HTTP status table of the package documentation),
// the verdict it amounts to when it is not the call's (a replay that cannot
// be answered: idem.ReplayOmitted, idem.ReplayCorrupt; else
// idem.VerdictUnknown) and the error to log.
func (w *httpWrapper[Req, Resp]) answer(ctx context.Context, req httpRequest, out idem.Outcome, err error) (Resp, idem.Verdict, error) {
	if out.Verdict == idem.Replayed {
		return w.replay(ctx, req, out)
	}
	return w.own(ctx, req, httprule.Refusal(out.Verdict, err, w.cfg.now(), w.cfg.keyParts)), idem.VerdictUnknown, err
}

// own is one of the wrapper's own answers, in the request's header mode,
// after the hook.
func (w *httpWrapper[Req, Resp]) own(ctx context.Context, req httpRequest, a httprule.Answer) Resp {
	resp := w.fl.native(answerView(a, req.multiAnswer))
	if w.hook != nil {
		w.hook(ctx, &resp, a.Verdict)
		if a.Header[HeaderReplayed] != "" {
			resp = w.mark(resp, req)
		}
	}
	return resp
}

// replay is the stored response, marked as replayed, after the hook (which
// cannot remove the mark); or, for a response that was not kept or does not
// decode, the wrapper's own answer and its verdict.
func (w *httpWrapper[Req, Resp]) replay(ctx context.Context, req httpRequest, out idem.Outcome) (Resp, idem.Verdict, error) {
	if out.ResultOmitted {
		return w.own(ctx, req, httprule.Omitted()), idem.ReplayOmitted, errResponseOmitted
	}
	resp, omitted, err := w.decode(out.Result, req)
	switch {
	case err != nil:
		return w.own(ctx, req, httprule.NewAnswer(httprule.Internal, "", idem.ReplayCorrupt)), idem.ReplayCorrupt, err
	case omitted:
		return w.own(ctx, req, httprule.Omitted()), idem.ReplayOmitted, errResponseOmitted
	}
	resp = w.mark(resp, req)
	if w.hook != nil {
		w.hook(ctx, &resp, idem.Replayed)
		resp = w.mark(resp, req)
	}
	return resp, idem.VerdictUnknown, nil
}

// errResponseOmitted explains idem.ReplayOmitted in a log record.
var errResponseOmitted = errors.New("idemlambda: the stored response was not kept (too large, or streamed): answered 500 response-not-replayable")

// decode reads a stored response: exactly as it was stored when it has the
// request's shape, else adapted (fit) from the neutral view when it is a
// Lambda wrapper's (or written before the envelope); another is an error.
func (w *httpWrapper[Req, Resp]) decode(result []byte, req httpRequest) (resp Resp, omitted bool, err error) {
	st, err := httprule.Decode(result)
	if err != nil || st.Omitted {
		return resp, st.Omitted, err
	}
	if st.Shape == req.shape {
		if err := json.Unmarshal(st.Response, &resp); err != nil {
			return resp, false, fmt.Errorf("%w: %s response: %v", httprule.ErrStoredFormat, st.Shape, err)
		}
		return resp, false, nil
	}
	if !lambdaShapes[st.Shape] {
		return resp, false, fmt.Errorf("%w: a %q response, not one of the Lambda wrappers", httprule.ErrStoredFormat, st.Shape)
	}
	var v response
	if err := json.Unmarshal(st.Response, &v); err != nil {
		return resp, false, fmt.Errorf("%w: %q response: %v", httprule.ErrStoredFormat, st.Shape, err)
	}
	return w.fl.native(fit(v, req.shape)), false, nil
}

// mark sets Idempotent-Replayed: true on resp, in the request's header
// mode, replacing any other spelling or value of it.
func (w *httpWrapper[Req, Resp]) mark(resp Resp, req httpRequest) Resp {
	v := w.fl.view(resp)
	if v.StatusCode == 0 {
		v.StatusCode = http.StatusOK
	}
	setHeader(&v, req.multiAnswer, HeaderReplayed, "true")
	return w.fl.native(v)
}

func (w *httpWrapper[Req, Resp]) callHook(ctx context.Context, resp *Resp, v idem.Verdict) {
	if w.hook != nil {
		w.hook(ctx, resp, v)
	}
}

// annotation names the request and the status answered in the record of
// its call.
func (w *httpWrapper[Req, Resp]) annotation(req httpRequest, status int) func(idem.Outcome, error) idem.Annotation {
	return func(idem.Outcome, error) idem.Annotation { return idem.Annotation{Attrs: w.attrs(req, status)} }
}

// attrs name the request (its method, path and the kinds of caller identity
// that scope its key, never their values) and the status answered (0: none,
// not logged).
func (w *httpWrapper[Req, Resp]) attrs(req httpRequest, status int) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("wrapper", "http"),
		slog.String("method", req.method),
		slog.String("path", req.path),
	}
	if status != 0 {
		attrs = append(attrs, slog.Int("status", status))
	}
	if len(req.identity) > 0 {
		labels := make([]string, 0, len(req.identity))
		for _, p := range req.identity {
			labels = append(labels, p[:strings.IndexByte(p, '=')])
		}
		sort.Strings(labels)
		attrs = append(attrs, slog.String("identity", strings.Join(labels, ",")))
	}
	return attrs
}
