package fakeaws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a fake AWS endpoint on 127.0.0.1. It answers each request with
// the next queued answer; once the queue is empty, with its fallback. Safe for
// concurrent use (mu guards queue and requests).
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port), for
	// aws.Config.BaseEndpoint.
	URL string

	tb       testing.TB
	srv      *httptest.Server
	fallback http.Handler
	ctx      context.Context // done when the server closes; ends Hang

	mu       sync.Mutex
	queue    []http.Handler
	requests []Request
}

// Request is what the server recorded of a request it received.
type Request struct {
	// Method and Path are the request's HTTP method and URL path.
	Method, Path string
	// Target is the X-Amz-Target header (the operation of a JSON-protocol
	// call, such as DynamoDB_20120810.PutItem), or empty.
	Target string
}

// New starts a Server and closes it when the test ends. Requests beyond the
// queue go to fallback; with a nil fallback such a request fails the test and
// gets a 500 InternalServerError in the DynamoDB shape.
func New(tb testing.TB, fallback http.Handler) *Server {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{tb: tb, fallback: fallback, ctx: ctx}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	tb.Cleanup(func() {
		cancel()
		s.srv.Close()
	})
	return s
}

// Queue appends answers; each is used for one request, in order.
func (s *Server) Queue(answers ...http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, answers...)
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) next(r *http.Request) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Target: r.Header.Get("X-Amz-Target")})
	if len(s.queue) > 0 {
		h := s.queue[0]
		s.queue = s.queue[1:]
		return h
	}
	return s.fallback
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	h := s.next(r)
	if h == nil {
		s.tb.Errorf("fakeaws: %s %s (target %q): no answer queued and no fallback", r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"))
		h = DynamoDBError(http.StatusInternalServerError, "InternalServerError", "fakeaws: no answer queued")
	}
	// The request's context also ends when the server closes, so that Hang
	// never holds up the test's cleanup.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	h.ServeHTTP(w, r.WithContext(ctx))
}
