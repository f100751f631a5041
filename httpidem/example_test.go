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
