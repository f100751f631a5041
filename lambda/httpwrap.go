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
func (w *httpWrapper[Req, Resp]) serve(ctx context.Context, event Req) (Resp, error) {
	req := w.request(event)
	key, body, early := w.admit(ctx, req, event)
	if early != nil {
		return *early, nil
	}
	var fresh *Resp  // the response of this call's own execution, if any
	var failed error // the handler's error, answered with a problem
	out, err := w.runner.Do(w.doContext(ctx, req), key, body, func(ctx context.Context) ([]byte, error) {
		resp, status, herr := w.run(withStoredKey(ctx, key), req, event)
		fresh, failed = &resp, herr
		if herr != nil || httprule.RetryableStatus(status) {
			return nil, httprule.RetryLater(status)
		}
		b, merr := httprule.Encode(req.shape, resp)
		if merr != nil { // the AWS response types always marshal
			return nil, core.MarkRetryLater(merr)
		}
		return b, nil
	})
	if fresh != nil {
		// The handler ran in this call: its response is the truth, whether
		// or not its outcome could be recorded (a failed record is logged).
		if failed != nil {
			w.log(ctx, slog.LevelError, req, key, "handler_error", http.StatusInternalServerError, out, failed)
			w.callHook(ctx, fresh, out.Verdict)
		}
		w.log(ctx, levelOf(err), req, key, out.Verdict.String(), w.fl.view(*fresh).StatusCode, out, err)
		return *fresh, nil
	}
	resp, err := w.answer(ctx, req, out, err)
	w.log(ctx, levelOf(err), req, key, out.Verdict.String(), w.fl.view(resp).StatusCode, out, err)
	return resp, nil
}

// levelOf is the log level of a wrapper's record of a call: a warning when
// the call failed.
func levelOf(err error) slog.Level {
	if err != nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// request is the event's view, with the identity header of
// WithIdentityHeader added to the caller identity.
func (w *httpWrapper[Req, Resp]) request(event Req) httpRequest {
	req := w.fl.request(event)
	if name := w.cfg.identityHeader; name != "" {
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
		req.identity = addIdentity(req.identity, "header:"+strings.ToLower(name), strings.Join(vals, ","))
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
		return w.refuse(ctx, req, httprule.NewAnswer(httprule.InvalidBody, err.Error(), idem.InvalidPayload), "invalid_body", err)
	}
	if httprule.NeedsBody(w.cfg.keyParts) {
		if err := decode(); err != nil {
			return "", nil, invalidBody(err)
		}
	}
	rk, err := httprule.FindKey(w.cfg.keyParts, req.headers, req.multi, body)
	if err == nil {
		key, err = rk.Stored(req.identity)
	}
	switch {
	case errors.Is(err, httprule.ErrNoKey) && w.cfg.optionalKey:
		resp, status, herr := w.run(ctx, req, event)
		if herr != nil {
			w.callHook(ctx, &resp, idem.VerdictUnknown)
		}
		w.log(ctx, slog.LevelInfo, req, "", "unkeyed", status, idem.Outcome{}, herr)
		return "", nil, &resp
	case errors.Is(err, httprule.ErrNoKey):
		return "", nil, w.refuse(ctx, req, httprule.KeyAnswer(w.cfg.keyParts, err), "missing_key", err)
	case err != nil:
		return "", nil, w.refuse(ctx, req, httprule.KeyAnswer(w.cfg.keyParts, err), "invalid_key", err)
	}
	if err := decode(); err != nil {
		return "", nil, invalidBody(err)
	}
	return key, body, nil
}

// doContext is the context of the runner's call for req: the wait of
// WithWait, and the request's fingerprint (httprule.Fingerprint: the method,
// the path and the body, under the wrapper's selection).
func (w *httpWrapper[Req, Resp]) doContext(ctx context.Context, req httpRequest) context.Context {
	return idem.ContextWithFingerprint(w.cfg.waitContext(ctx), func(body []byte) (string, error) {
		return httprule.Fingerprint(req.method, req.path, body, w.sel)
	})
}

// refuse answers a request that could not be keyed, and logs why.
func (w *httpWrapper[Req, Resp]) refuse(ctx context.Context, req httpRequest, a httprule.Answer, decision string, err error) *Resp {
	resp := w.own(ctx, req, a)
	w.log(ctx, slog.LevelWarn, req, "", decision, a.Status, idem.Outcome{}, err)
	return &resp
}

// answer maps the runner's answer, for a call whose handler did not run in
// it, to the response (the HTTP status table of the package documentation)
// and the error to log.
func (w *httpWrapper[Req, Resp]) answer(ctx context.Context, req httpRequest, out idem.Outcome, err error) (Resp, error) {
	if out.Verdict == idem.Replayed {
		return w.replay(ctx, req, out)
	}
	return w.own(ctx, req, httprule.Refusal(out.Verdict, err, w.cfg.now())), err
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
// cannot remove the mark).
func (w *httpWrapper[Req, Resp]) replay(ctx context.Context, req httpRequest, out idem.Outcome) (Resp, error) {
	if out.ResultOmitted {
		return w.own(ctx, req, httprule.Omitted()), nil
	}
	resp, omitted, err := w.decode(out.Result, req)
	switch {
	case err != nil:
		return w.own(ctx, req, httprule.NewAnswer(httprule.Internal, "", idem.Replayed)), err
	case omitted:
		return w.own(ctx, req, httprule.Omitted()), nil
	}
	resp = w.mark(resp, req)
	if w.hook != nil {
		w.hook(ctx, &resp, idem.Replayed)
		resp = w.mark(resp, req)
	}
	return resp, nil
}

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

func (w *httpWrapper[Req, Resp]) log(ctx context.Context, level slog.Level, req httpRequest, key, decision string, status int, out idem.Outcome, err error) {
	l := w.cfg.logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("wrapper", "http"),
		slog.String("method", req.method),
		slog.String("path", req.path),
		slog.String("verdict", decision),
		slog.Int("status", status),
	}
	if len(req.identity) > 0 {
		labels := make([]string, 0, len(req.identity))
		for _, p := range req.identity {
			labels = append(labels, p[:strings.IndexByte(p, '=')])
		}
		sort.Strings(labels)
		attrs = append(attrs, slog.String("identity", strings.Join(labels, ",")))
	}
	attrs = outcomeAttrs(attrs, key, out, err)
	l.LogAttrs(ctx, level, "idemlambda", attrs...)
}
