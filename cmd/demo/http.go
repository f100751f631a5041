package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/examples/orders"
)

// serveAPI translates an HTTP request into an API Gateway HTTP API event
// (payload format 2.0), invokes orders-api with a Lambda-like deadline, and
// writes its answer back.
func (st *stack) serveAPI(w http.ResponseWriter, r *http.Request) {
	ev, err := apiGatewayEvent(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), invocationTimeout)
	defer cancel()
	resp, err := st.api(ctx, ev)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies { // as API Gateway sends payload 2.0 cookies
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			http.Error(w, "function answered bad base64", http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body) // a failed write is the client's error: it sees the answer cut short
}

// apiGatewayEvent builds the event API Gateway would send for r: header
// names lower-cased and repeated values joined with commas, a body that is
// not UTF-8 base64-encoded.
func apiGatewayEvent(r *http.Request) (events.APIGatewayV2HTTPRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	headers := map[string]string{}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: r.Method + " " + r.URL.Path, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: r.Method + " " + r.URL.Path, AccountID: "000000000000", Stage: "$default",
			RequestID: orders.NewID("demo-"), APIID: "demo", DomainName: r.Host,
			Time: time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: hostOf(r.RemoteAddr), UserAgent: r.UserAgent(),
			},
		},
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// answer is what the script shows of an API answer.
type answer struct {
	status   int
	replayed string
	orderID  string
	title    string
}

func post(ctx context.Context, url, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var b struct {
		OrderID string `json:"order_id"`
		Title   string `json:"title"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	_ = json.Unmarshal(raw, &b)
	return answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), orderID: b.OrderID, title: b.Title}, nil
}

// String describes the answer on one line.
func (a answer) String() string {
	s := fmt.Sprintf("%d %s", a.status, http.StatusText(a.status))
	if a.replayed != "" {
		s += ", Idempotent-Replayed: " + a.replayed
	}
	if a.orderID != "" {
		s += ", order_id " + a.orderID
	}
	if a.title != "" {
		s += ", problem: " + a.title
	}
	return s
}
