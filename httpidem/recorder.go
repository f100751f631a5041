package httpidem

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"slices"
)

// recorder passes a handler's response through to the client as it is
// written, and records it for replay: the status, the headers the handler
// set (those that differ from the headers before it ran, so that the
// headers of outer middleware, a request id say, are not replayed; of
// Set-Cookie, only the cookies the handler added, never an outer
// middleware's session) and the body, up to a limit. A response that flushes, hijacks the connection or
// writes more than the limit is not recorded (omitted). Not safe for
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
}

func newRecorder(w http.ResponseWriter, limit int) *recorder {
	return &recorder{w: w, limit: limit, before: w.Header().Clone()}
}

// Header returns the response's header map.
func (c *recorder) Header() http.Header { return c.w.Header() }

// WriteHeader records and sends the final status; an informational one
// (103 Early Hints) is sent only.
func (c *recorder) WriteHeader(code int) {
	if c.status != 0 || c.hijacked || (code >= 100 && code < 200 && code != http.StatusSwitchingProtocols) {
		c.w.WriteHeader(code)
		return
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
	c.w.WriteHeader(code)
	c.status = code
}

// Write records and sends body bytes.
func (c *recorder) Write(p []byte) (int, error) {
	if c.status == 0 && !c.hijacked {
		c.WriteHeader(http.StatusOK)
	}
	if !c.omitted {
		if c.body.Len()+len(p) > c.limit {
			c.omitted = true
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(p)
		}
	}
	return c.w.Write(p)
}

// FlushError sends what was written; the response is then a stream, not
// recorded.
func (c *recorder) FlushError() error {
	if c.status == 0 && !c.hijacked {
		c.WriteHeader(http.StatusOK)
	}
	c.omitted = true
	return http.NewResponseController(c.w).Flush()
}

// Flush is FlushError for handlers that use http.Flusher.
func (c *recorder) Flush() { _ = c.FlushError() }

// Hijack hands the connection to the handler; the response is not
// recorded.
func (c *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(c.w).Hijack()
	if err == nil {
		c.hijacked, c.omitted = true, true
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the writer underneath, for the
// deadlines and full duplex.
func (c *recorder) Unwrap() http.ResponseWriter { return c.w }

// finish sends the implicit 200 of a handler that wrote nothing, and
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
