package idemlambda

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/idemgo/idem/internal/httprule"
)

// response is the event-neutral view of an HTTP answer: every field of the
// four response types, under their JSON names, so that the JSON of any of
// them (and of the Response type the wrappers stored before the envelope
// named shapes) decodes into it.
type response struct {
	StatusCode        int                 `json:"statusCode"`
	StatusDescription string              `json:"statusDescription,omitempty"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Cookies           []string            `json:"cookies,omitempty"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
}

// setHeader sets one header of v, removing every other spelling of its
// name from both header maps first (API Gateway merges them, and a
// lower-case copy would otherwise survive). With multi it goes in
// MultiValueHeaders, else in Headers.
func setHeader(v *response, multi bool, name, value string) {
	for k := range v.Headers {
		if strings.EqualFold(k, name) {
			delete(v.Headers, k)
		}
	}
	for k := range v.MultiValueHeaders {
		if strings.EqualFold(k, name) {
			delete(v.MultiValueHeaders, k)
		}
	}
	if multi {
		if v.MultiValueHeaders == nil {
			v.MultiValueHeaders = map[string][]string{}
		}
		v.MultiValueHeaders[name] = []string{value}
		return
	}
	if v.Headers == nil {
		v.Headers = map[string]string{}
	}
	v.Headers[name] = value
}

// answerView is the view of one of the wrapper's own answers, its headers
// in the request's mode. StatusDescription is for ALBs ("409 Conflict");
// the other response types have no such field and drop it.
func answerView(a httprule.Answer, multi bool) response {
	v := response{StatusCode: a.Status, StatusDescription: statusDescription(a.Status), Body: string(a.Body)}
	for k, val := range a.Header {
		setHeader(&v, multi, k, val)
	}
	return v
}

func statusDescription(code int) string {
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

// carries reports where a response of shape carries headers: in
// MultiValueHeaders (multi) or Headers, and cookies in Cookies (cookies) or
// as Set-Cookie headers.
func carries(shape string) (multi, cookies bool) {
	switch shape {
	case shapeREST, shapeALBMulti:
		return true, false
	case shapeHTTPAPI, shapeFunctionURL:
		return false, true
	}
	return false, false
}

// fit adapts a stored response of another shape (or one stored before the
// envelope named shapes) to shape: every header moves to where that
// response type carries it, and Set-Cookie values to Cookies where it has
// them. A single-valued target keeps the first of several Set-Cookie
// values and joins the values of other headers with ", ".
func fit(v response, shape string) response {
	multi, cookies := carries(shape)
	all := map[string][]string{}
	for k, val := range v.Headers {
		all[http.CanonicalHeaderKey(k)] = []string{val}
	}
	for k, vals := range v.MultiValueHeaders { // API Gateway's rule: multi-value wins
		all[http.CanonicalHeaderKey(k)] = vals
	}
	setCookie := append(append([]string(nil), all["Set-Cookie"]...), v.Cookies...)
	delete(all, "Set-Cookie")
	out := response{StatusCode: v.StatusCode, StatusDescription: v.StatusDescription, Body: v.Body, IsBase64Encoded: v.IsBase64Encoded}
	switch {
	case cookies:
		out.Cookies = setCookie
	case len(setCookie) > 0 && multi:
		all["Set-Cookie"] = setCookie
	case len(setCookie) > 0:
		all["Set-Cookie"] = setCookie[:1]
	}
	for k, vals := range all {
		if multi {
			if out.MultiValueHeaders == nil {
				out.MultiValueHeaders = map[string][]string{}
			}
			out.MultiValueHeaders[k] = vals
			continue
		}
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		out.Headers[k] = strings.Join(vals, ", ")
	}
	return out
}
