package httpidem

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"slices"
)

// recorder holds a handler's response until its outcome is recorded, and
// records it for replay: the status, the headers the handler set (those
// that differ from the headers before it ran, so that the headers of outer
// middleware, a request id say, are not replayed; of Set-Cookie, only the
// cookies the handler added, never an outer middleware's session) and the
// body, up to a limit. The middleware then sends it (send), or, when the
// store refused to commit it, answers in its place (discard). A response
// that flushes, hijacks the connection or writes more than the limit goes
// to the client as it is written from then on and is not recorded
// (omitted). Informational responses (103 Early Hints) are sent at once.
// Not safe for
// concurrent use, as no http.ResponseWriter is.
type recorder struct {
	w        http.ResponseWriter
	limit    int
	before   http.Header
	status   int // 0 until the final header is written
	header   http.Header
	body     bytes.Buffer
	omitted  bool
	hijacked bool
	// sent: the final header has gone to the client (a stream, or send);
	// dropped: discard gave up the response.
	sent, dropped bool
}

func newRecorder(w http.ResponseWriter, limit int) *recorder {
	return &recorder{w: w, limit: limit, before: w.Header().Clone()}
}

// Header returns the response's header map.
func (c *recorder) Header() http.Header { return c.w.Header() }

// WriteHeader records the final status (sent with the response, or at
// once once the response streams); an informational one is sent only.
func (c *recorder) WriteHeader(code int) {
	if c.sent || (code >= 100 && code < 200 && code != http.StatusSwitchingProtocols) {
		c.w.WriteHeader(code)
		return
	}
	if c.status != 0 || c.hijacked {
		return // superfluous, as net/http would have it
	}
	c.header = http.Header{}
	for k, vs := range c.w.Header() {
		switch {
		case slices.Equal(vs, c.before[k]):
		case http.CanonicalHeaderKey(k) == setCookie:
			if added := addedValues(c.before[k], vs); len(added) > 0 {
				c.header[k] = added
			}
		default:
			c.header[k] = slices.Clone(vs)
		}
	}
	c.status = code
}

// Write records body bytes; past the limit, the response streams.
func (c *recorder) Write(p []byte) (int, error) {
	if c.status == 0 && !c.hijacked {
		c.WriteHeader(http.StatusOK)
	}
	if !c.sent && c.body.Len()+len(p) > c.limit {
		c.stream()
	}
	if c.sent || c.hijacked {
		return c.w.Write(p)
	}
	return c.body.Write(p)
}

// stream sends what is held and passes the rest through: the response is
// then a stream, not recorded.
func (c *recorder) stream() {
	c.omitted = true
	c.send()
	c.body = bytes.Buffer{}
}

// FlushError sends what was written; the response is then a stream, not
// recorded.
func (c *recorder) FlushError() error {
	if c.status == 0 && !c.hijacked {
		c.WriteHeader(http.StatusOK)
	}
	c.stream()
	return http.NewResponseController(c.w).Flush()
}

// Flush is FlushError for handlers that use http.Flusher.
func (c *recorder) Flush() { _ = c.FlushError() }

// Hijack hands the connection to the handler, after what was written; the
// response is not recorded.
func (c *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if c.status != 0 {
		c.stream()
	}
	conn, rw, err := http.NewResponseController(c.w).Hijack()
	if err == nil {
		c.hijacked, c.omitted = true, true
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the writer underneath, for the
// deadlines and full duplex.
func (c *recorder) Unwrap() http.ResponseWriter { return c.w }

// finish makes the implicit 200 of a handler that wrote nothing, and
// returns the status answered (0 if the connection was hijacked first).
func (c *recorder) finish() int {
	if c.status == 0 && !c.hijacked {
		c.WriteHeader(http.StatusOK)
	}
	return c.status
}

// setCookie is the header whose values are the cookies a response sets.
const setCookie = "Set-Cookie"

// addedValues returns the values of after that before does not have (each
// value of before matching one of after at most once), in after's order.
func addedValues(before, after []string) []string {
	left := slices.Clone(before)
	var added []string
	for _, v := range after {
		if i := slices.Index(left, v); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		added = append(added, v)
	}
	return added
}

// send sends the response held, once: its status and what it wrote.
func (c *recorder) send() {
	if c.sent || c.dropped || c.hijacked || c.status == 0 {
		return
	}
	c.sent = true
	c.w.WriteHeader(c.status)
	if c.body.Len() > 0 {
		_, _ = c.w.Write(c.body.Bytes()) // a client gone is nothing to act on
	}
}

// discard gives up the response held, headers included (they are those
// from before the handler ran again), for an answer in its place; false if
// it is already on its way to the client.
func (c *recorder) discard() bool {
	if c.sent || c.hijacked {
		return false
	}
	c.dropped = true
	h := c.w.Header()
	for k := range h {
		delete(h, k)
	}
	for k, vs := range c.before {
		h[k] = vs
	}
	return true
}
