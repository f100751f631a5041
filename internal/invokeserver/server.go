// Package invokeserver is a local Lambda Invoke API for tests: an
// httptest server that answers POST /2015-03-31/functions/{FunctionName}/
// invocations as Lambda does for a durable function invoked asynchronously,
// in the shapes the AWS SDK for Go v2 (service/lambda, restJson1) sends and
// decodes: the execution name in the X-Amz-Durable-Execution-Name header,
// the invocation type in X-Amz-Invocation-Type, the payload as the body; a
// started execution's ARN in X-Amz-Durable-Execution-Arn with status 202;
// errors as their status code, an X-Amzn-ErrorType header naming the
// exception and a JSON body with Type and message.
//
// It keeps the executions by name and follows Lambda's documented
// behaviour for an execution name
// (https://docs.aws.amazon.com/lambda/latest/dg/durable-execution-idempotency.html):
//
//	existing execution                   same payload        another payload
//	none, or closed past retention       started (202)       started (202)
//	running                              the existing one    DurableExecutionAlreadyStartedException (409)
//	closed within retention              the existing one    DurableExecutionAlreadyStartedException (409)
//
// "The existing one" is answered as a start is (202, the existing ARN): the
// API documents 202 as the status of every Event invocation. Payloads are
// compared byte for byte. Retention runs from the close (CloseExecution) by
// the server's fake clock (Advance). Faults are queued (Fail): throttling
// (429 TooManyRequestsException with Retry-After) and 5xx
// (ServiceException), a refused permission (403 AccessDeniedException),
// each answering one request. A payload over the
// asynchronous limit is 413 RequestTooLargeException, one that is not JSON
// 400 InvalidRequestContentException, a name outside 1 to 64 characters of
// [A-Za-z0-9_-], an unqualified function or a synchronous invocation 400
// InvalidParameterValueException.
package invokeserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of a Server.
const (
	// DefaultRetention is a closed execution's retention: the 14 days of a
	// function whose DurableConfig sets no RetentionPeriodInDays.
	DefaultRetention = 14 * 24 * time.Hour
	// DefaultMaxPayload is the asynchronous invocation payload limit (1 MB).
	DefaultMaxPayload = 1 << 20
)

// Fault is a failure the server answers instead of the invocation.
type Fault int

// The faults.
const (
	// Throttle: 429 TooManyRequestsException, with Retry-After (1 second
	// unless SetRetryAfter says otherwise).
	Throttle Fault = iota + 1
	// ServiceError: 500 ServiceException.
	ServiceError
	// Forbidden: 403 AccessDeniedException, as for a caller without
	// lambda:InvokeFunction on the function.
	Forbidden
)

// Invocation is one request the server answered.
type Invocation struct {
	Function string // the function as the path named it, with its qualifier
	Name     string // the execution name ("" if none was given)
	Payload  []byte
	Status   int
	ARN      string // the execution's ARN, answered with 202
}

type execution struct {
	arn      string
	payload  []byte
	closed   bool
	closedAt time.Time
}

// Server is the local Invoke API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base URL, for the client's BaseEndpoint.
	URL string

	srv        *httptest.Server
	mu         sync.Mutex
	now        time.Time
	retention  time.Duration
	maxPayload int
	retryAfter int
	executions map[string]*execution
	faults     []Fault
	log        []Invocation
	ids        int
}

// Start starts a server on 127.0.0.1 with the defaults; Close stops it.
func Start() *Server {
	s := &Server{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), retention: DefaultRetention,
		maxPayload: DefaultMaxPayload, retryAfter: 1, executions: map[string]*execution{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetMaxPayload sets the payload limit (default DefaultMaxPayload).
func (s *Server) SetMaxPayload(n int) { s.mu.Lock(); s.maxPayload = n; s.mu.Unlock() }

// SetRetryAfter sets the Retry-After, in seconds, of a throttled request
// (default 1).
func (s *Server) SetRetryAfter(seconds int) { s.mu.Lock(); s.retryAfter = seconds; s.mu.Unlock() }

// Fail queues faults: each answers the next request in its place.
func (s *Server) Fail(faults ...Fault) {
	s.mu.Lock()
	s.faults = append(s.faults, faults...)
	s.mu.Unlock()
}

// CloseExecution closes the execution of name (succeeded, failed, stopped or
// timed out: all the same to a start); its retention runs from now. It
// reports whether there was a running one.
func (s *Server) CloseExecution(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.executions[name]
	if !ok || e.closed {
		return false
	}
	e.closed, e.closedAt = true, s.now
	return true
}

// Advance moves the server's clock by d.
func (s *Server) Advance(d time.Duration) { s.mu.Lock(); s.now = s.now.Add(d); s.mu.Unlock() }

// Started returns the number of executions started in all, the ones past
// retention and started again included.
func (s *Server) Started() int { s.mu.Lock(); defer s.mu.Unlock(); return s.ids }

// Invocations returns the requests answered so far, in order.
func (s *Server) Invocations() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Invocation(nil), s.log...)
}

// Payload returns the payload of the execution of name, and whether it
// exists (running, or closed within retention).
func (s *Server) Payload(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(name)
	if !ok {
		return nil, false
	}
	return e.payload, true
}

var (
	namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// function: a function name, ARN or partial ARN, with its qualifier
	// as its last part when it has one.
	qualifiedFunction = regexp.MustCompile(`^(?:arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:)?[a-zA-Z0-9_-]+:(\$LATEST|[a-zA-Z0-9_-]+)$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Amzn-RequestId", fmt.Sprintf("req-%d", time.Now().UnixNano()))
	inv, status, errType, msg := s.invoke(r)
	s.mu.Lock()
	inv.Status = status
	s.log = append(s.log, inv)
	retryAfter := s.retryAfter
	s.mu.Unlock()
	if errType != "" {
		writeError(w, status, errType, msg, retryAfter)
		return
	}
	w.Header().Set("X-Amz-Durable-Execution-Arn", inv.ARN)
	w.WriteHeader(status)
}

// invoke answers one request: the invocation as it was sent, the status,
// and for an error its exception and message.
func (s *Server) invoke(r *http.Request) (inv Invocation, status int, errType, msg string) {
	fn, ok := functionOf(r)
	if !ok {
		return inv, http.StatusNotFound, "ResourceNotFoundException", "Function not found: " + r.URL.Path
	}
	inv.Function, inv.Name = fn, r.Header.Get("X-Amz-Durable-Execution-Name")
	s.mu.Lock()
	limit := s.maxPayload
	s.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	inv.Payload = body
	switch {
	case err != nil:
		return inv, http.StatusBadRequest, "InvalidRequestContentException", err.Error()
	case len(body) > limit:
		return inv, http.StatusRequestEntityTooLarge, "RequestTooLargeException",
			fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", limit)
	}
	if status, errType, msg = s.fault(); errType != "" {
		return inv, status, errType, msg
	}
	if status, errType, msg = validate(r, fn, inv.Name, body); errType != "" {
		return inv, status, errType, msg
	}
	return s.start(inv)
}

// functionOf is the function the path names, unescaped, with the Qualifier
// query parameter appended when there is one.
func functionOf(r *http.Request) (string, bool) {
	const prefix, suffix = "/2015-03-31/functions/", "/invocations"
	p := r.URL.EscapedPath()
	if r.Method != http.MethodPost || !strings.HasPrefix(p, prefix) || !strings.HasSuffix(p, suffix) {
		return "", false
	}
	fn, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(p, prefix), suffix))
	if err != nil || fn == "" {
		return "", false
	}
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		fn += ":" + q
	}
	return fn, true
}

// fault takes the next queued fault, if any.
func (s *Server) fault() (int, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return 0, "", ""
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	switch f {
	case Throttle:
		return http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded."
	case Forbidden:
		return http.StatusForbidden, "AccessDeniedException", "User is not authorized to perform: lambda:InvokeFunction"
	}
	return http.StatusInternalServerError, "ServiceException", "Lambda encountered an internal error"
}

// validate refuses what Lambda refuses before it looks at the name's
// executions.
func validate(r *http.Request, fn, name string, body []byte) (int, string, string) {
	switch {
	case r.Header.Get("X-Amz-Invocation-Type") != "Event":
		return http.StatusBadRequest, "InvalidParameterValueException", "this server answers asynchronous invocations (X-Amz-Invocation-Type: Event) only"
	case !qualifiedFunction.MatchString(fn):
		return http.StatusBadRequest, "InvalidParameterValueException", "durable functions are invoked by a qualified ARN (a version or an alias): " + fn
	case name != "" && !namePattern.MatchString(name):
		return http.StatusBadRequest, "InvalidParameterValueException", "DurableExecutionName must be 1 to 64 characters of [a-zA-Z0-9-_]: " + name
	case !json.Valid(body):
		return http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json"
	}
	return 0, "", ""
}

// live returns the execution of name unless there is none or it is closed
// past retention (then it is forgotten). s.mu is held.
func (s *Server) live(name string) (*execution, bool) {
	e, ok := s.executions[name]
	if ok && e.closed && !s.now.Before(e.closedAt.Add(s.retention)) {
		delete(s.executions, name)
		return nil, false
	}
	return e, ok
}

// start applies the behaviour table to a valid invocation.
func (s *Server) start(inv Invocation) (Invocation, int, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := inv.Name
	if name == "" {
		name = fmt.Sprintf("generated-%d", s.ids+1)
	}
	if e, ok := s.live(name); ok {
		if !bytes.Equal(e.payload, inv.Payload) {
			return inv, http.StatusConflict, "DurableExecutionAlreadyStartedException",
				fmt.Sprintf("Durable execution with name %s already exists with a different input", name)
		}
		inv.ARN = e.arn
		return inv, http.StatusAccepted, "", ""
	}
	s.ids++
	e := &execution{arn: fmt.Sprintf("%s/durable-execution/%s/%08d", arnOf(inv.Function), name, s.ids), payload: inv.Payload}
	s.executions[name] = e
	inv.ARN = e.arn
	return inv, http.StatusAccepted, "", ""
}

// arnOf is the function's ARN as a durable execution ARN begins.
func arnOf(fn string) string {
	if strings.HasPrefix(fn, "arn:") {
		return fn
	}
	return "arn:aws:lambda:us-east-1:123456789012:function:" + fn
}

// writeError answers an exception as Lambda does.
func writeError(w http.ResponseWriter, status int, errType, msg string, retryAfter int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", errType)
	body := map[string]string{"Type": "User", "message": msg}
	switch errType {
	case "TooManyRequestsException":
		h.Set("Retry-After", strconv.Itoa(retryAfter))
		body["Reason"] = "ReservedFunctionConcurrentInvocationLimitExceeded"
	case "ServiceException":
		body = map[string]string{"Type": "Service", "Message": msg}
	case "DurableExecutionAlreadyStartedException":
		body = map[string]string{"Type": "User", "Message": msg}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client reads what arrived
}
