package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/idemgo/idem/internal/capacity"
)

// The counting proxy charges every DynamoDB request it forwards with a
// capacity.Ledger: the units computed from the items sent and, where the
// server reports them and they are trusted (dynalite), the units reported.
// Requests on one item are serialized, so that the ledger's shadow of the
// table follows the server's order.

const capacityPath = "/__bench/capacity"

// lockStripes is the number of locks the items hash over.
const lockStripes = 1024

// charger charges the requests the proxy forwards.
type charger struct {
	upstream string
	client   *http.Client
	ledger   *capacity.Ledger
	trust    bool // the server's reports are the figures (dynalite)
	stripes  [lockStripes]sync.Mutex

	mu      sync.Mutex
	totals  capacity.Totals // guarded by mu
	errs    int64           // guarded by mu: requests the ledger could not charge
	lastErr string          // guarded by mu
}

// capacityReport is what capacityPath answers.
type capacityReport struct {
	Totals    capacity.Totals `json:"totals"`
	Errors    int64           `json:"errors"`
	LastError string          `json:"last_error,omitempty"`
}

// itemOps are the operations that read or write items: the proxy asks the
// server to report their consumed capacity.
var itemOps = map[string]bool{"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"BatchGetItem": true, "BatchWriteItem": true, "Query": true, "Scan": true,
	"TransactWriteItems": true, "TransactGetItems": true}

// chargedOps are the operations the ledger reads: item operations and the
// ones that tell it a table's key schema.
func charged(op string) bool {
	return itemOps[op] || op == "CreateTable" || op == "DescribeTable" || op == "DeleteTable"
}

func (c *charger) report() capacityReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := capacityReport{Totals: capacity.Totals{}, Errors: c.errs, LastError: c.lastErr}
	for k, v := range c.totals {
		out.Totals[k] = v
	}
	return out
}

func (c *charger) fail(err error) {
	c.mu.Lock()
	c.errs++
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// serve forwards one DynamoDB request of operation op and charges it.
func (c *charger) serve(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	pr, err := capacity.ParseRequest(op, body)
	if err != nil {
		c.fail(err)
		pr, _ = capacity.ParseRequest(op, []byte(`{}`))
	}
	unlock := c.lock(r.Context(), r.Header, pr)
	defer unlock()
	sent, injected := body, false
	if c.trust && itemOps[op] {
		sent, injected = askCapacity(body)
	}
	resp, respBody, err := c.forward(r, sent)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	ch, err := c.ledger.ChargeRequest(pr, respBody, resp.StatusCode)
	if err != nil {
		c.fail(fmt.Errorf("%s: %w", op, err))
	} else if itemOps[op] {
		c.mu.Lock()
		c.totals.Add(ch, c.trust)
		c.mu.Unlock()
	}
	if injected {
		respBody = dropCapacity(resp.Header, respBody)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// lock locks the stripes of the items the request touches, learning the
// table's key schema first if the ledger does not know it, and returns the
// function that unlocks them.
func (c *charger) lock(ctx context.Context, h http.Header, pr *capacity.Request) func() {
	keys, err := c.ledger.Keys(pr)
	var ute *capacity.UnknownTableError
	if errors.As(err, &ute) {
		if err := c.describe(ctx, h, ute.Table); err != nil {
			c.fail(err)
		}
		keys, err = c.ledger.Keys(pr)
	}
	if err != nil {
		c.fail(err)
	}
	var idx []int
	for _, k := range keys {
		f := fnv.New32a()
		_, _ = f.Write([]byte(k))
		idx = append(idx, int(f.Sum32()%lockStripes))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		c.stripes[i].Lock()
	}
	return func() {
		for _, i := range slices.Backward(idx) {
			c.stripes[i].Unlock()
		}
	}
}

// describe asks the server for a table's key schema and teaches it the
// ledger (the request is the proxy's own: not counted).
func (c *charger) describe(ctx context.Context, h http.Header, table string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.upstream+"/", strings.NewReader(fmt.Sprintf(`{"TableName":%q}`, table)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.DescribeTable")
	req.Header.Set("Authorization", h.Get("Authorization"))
	req.Header.Set("X-Amz-Date", h.Get("X-Amz-Date"))
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_, err = c.ledger.Charge("DescribeTable", []byte(fmt.Sprintf(`{"TableName":%q}`, table)), b, resp.StatusCode)
	return err
}

// forward sends the request with body to the server and reads the answer.
func (c *charger) forward(r *http.Request, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, c.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	req.Header.Del("Accept-Encoding") // an identity answer, which the ledger reads
	req.ContentLength = int64(len(body))
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// askCapacity adds ReturnConsumedCapacity TOTAL to a request (a JSON
// object) that does not ask for it, and reports whether it did. The
// request's signature no longer matches its body: the local servers do not
// check it.
func askCapacity(body []byte) ([]byte, bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return body, false
	}
	if i := bytes.Index(b, []byte(`"ReturnConsumedCapacity"`)); i >= 0 {
		var m struct{ ReturnConsumedCapacity string }
		if json.Unmarshal(b, &m) != nil || m.ReturnConsumedCapacity != "NONE" {
			return body, false
		}
		// The first "NONE" after the name is its value.
		out := append(bytes.Clone(b[:i]), bytes.Replace(b[i:], []byte(`"NONE"`), []byte(`"TOTAL"`), 1)...)
		return out, true
	}
	rest := bytes.TrimLeft(b[1:], " \t\r\n")
	out := append([]byte(`{"ReturnConsumedCapacity":"TOTAL"`), ',')
	if len(rest) > 0 && rest[0] == '}' {
		out = out[:len(out)-1]
	}
	return append(out, rest...), true
}

// dropCapacity removes ConsumedCapacity from an answer whose request did
// not ask for it, so that the client reads what it would have had, and
// fixes the answer's CRC32 header (which the AWS SDK checks).
func dropCapacity(h http.Header, body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	if _, ok := m["ConsumedCapacity"]; !ok {
		return body
	}
	delete(m, "ConsumedCapacity")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	if h.Get("X-Amz-Crc32") != "" {
		h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(out)), 10))
	}
	return out
}
