package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/memstore"
)

// A POST route of the standard mux made idempotent: a retry with the same
// Idempotency-Key gets the first response back, marked as replayed; the
// same key with another body is refused.
func ExampleMiddleware() {
	runner, err := idem.New(memstore.New()) // ddbstore or redisstore across processes
	if err != nil {
		panic(err)
	}
	idempotent, err := httpidem.Middleware(runner)
	if err != nil {
		panic(err)
	}
	orders := 0
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order_id":"ord-%d"}`, orders)
	})))
	srv := httptest.NewServer(mux) // on 127.0.0.1
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") == httpidem.ProblemContentType {
			b = []byte(resp.Header.Get("Content-Type"))
		}
		fmt.Println(resp.StatusCode, resp.Header.Get(httpidem.HeaderReplayed), string(b))
	}
	post("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"book"}`)
	post("8e03978e-40d5-43e8-bc93-6894a57f9324", `{ "sku": "book" }`) // the client's retry
	post("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"pen"}`)
	post("", `{"sku":"book"}`)
	fmt.Println("orders created:", orders)
	// Output:
	// 201  {"order_id":"ord-1"}
	// 201 true {"order_id":"ord-1"}
	// 422  application/problem+json
	// 400  application/problem+json
	// orders created: 1
}

// A webhook receiver keyed by the sender's delivery id (GitHub's
// X-GitHub-Delivery) rather than an Idempotency-Key header: a redelivery
// gets the first answer back.
func ExampleWithKeyHeader() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	idempotent, err := httpidem.Middleware(runner, httpidem.WithEndpoint("github-builds"), httpidem.WithKeyHeader("X-GitHub-Delivery"))
	if err != nil {
		panic(err)
	}
	builds := 0
	srv := httptest.NewServer(idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		builds++
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "build %d", builds)
	})))
	defer srv.Close()
	deliver := func(guid string) {
		req, _ := http.NewRequest("POST", srv.URL+"/hooks/github", strings.NewReader(`{"ref":"refs/heads/main"}`))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", guid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get(httpidem.HeaderReplayed), string(b))
	}
	deliver("72d3162e-cc78-11e3-81ab-4c9367dc0958")
	deliver("72d3162e-cc78-11e3-81ab-4c9367dc0958") // redelivered from GitHub's settings
	deliver("9a1b0c2d-cc79-11e3-8f3e-2a3b4c5d6e7f")
	// Output:
	// 202  build 1
	// 202 true build 1
	// 202  build 2
}
