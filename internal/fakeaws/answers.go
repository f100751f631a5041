package fakeaws

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// DynamoDBNamespace is the namespace DynamoDB puts before its own error
// codes in __type.
const DynamoDBNamespace = "com.amazonaws.dynamodb.v20120810"

// SQSNamespace is the namespace SQS puts before its error shapes in __type.
const SQSNamespace = "com.amazonaws.sqs"

// Response is a complete HTTP answer. Its ServeHTTP writes the header, a
// Content-Length, the status and the body.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers.
	Header http.Header
	// Body is the response body.
	Body []byte
}

// ServeHTTP writes the response.
func (a Response) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	for k, vs := range a.Header {
		w.Header()[k] = append([]string(nil), vs...)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

var lastID atomic.Uint64

// requestID returns a new request id, unique within the test binary.
func requestID() string {
	return fmt.Sprintf("FAKEAWS%045d", lastID.Add(1))
}

// JSONResponse is an answer of an AWS JSON 1.0 service (DynamoDB's, for a
// successful call too): the status, Content-Type application/x-amz-json-1.0,
// x-amzn-RequestId, X-Amz-Crc32 (the CRC-32 of body, which the DynamoDB
// client checks) and body.
func JSONResponse(status int, body []byte) Response {
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", requestID())
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	return Response{Status: status, Header: h, Body: body}
}

// JSONError is a failed call of an AWS JSON 1.0 service: JSONResponse with
// the body {"__type":typ,"message":message}. typ is the error's shape id,
// such as "com.amazon.coral.availability#ThrottlingException".
func JSONError(status int, typ, message string) Response {
	body, err := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{typ, message})
	if err != nil {
		panic(err) // two strings always marshal
	}
	return JSONResponse(status, body)
}

// DynamoDBError is a failed DynamoDB call (JSONError). A code without a
// namespace gets DynamoDBNamespace ("ProvisionedThroughputExceededException"
// is sent as "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException");
// a code with one is sent as given (DynamoDB's throttle and validation errors
// come from other namespaces: "com.amazon.coral.availability#ThrottlingException",
// "com.amazon.coral.validate#ValidationException").
func DynamoDBError(status int, code, message string) Response {
	if !strings.Contains(code, "#") {
		code = DynamoDBNamespace + "#" + code
	}
	return JSONError(status, code, message)
}

// DynamoDBTransactionCanceled is TransactWriteItems cancelled as DynamoDB
// answers it: HTTP 400, TransactionCanceledException, and one
// CancellationReason per item of the request, in order, with the given
// codes ("None", "ConditionalCheckFailed", "TransactionConflict", ...).
func DynamoDBTransactionCanceled(codes ...string) Response {
	type reason struct {
		Code    string `json:"Code"`
		Message string `json:"Message,omitempty"`
	}
	reasons := make([]reason, len(codes))
	for i, c := range codes {
		reasons[i] = reason{Code: c}
		if c == "ConditionalCheckFailed" {
			reasons[i].Message = "The conditional request failed"
		}
	}
	body, err := json.Marshal(struct {
		Type    string   `json:"__type"`
		Message string   `json:"message"`
		Reasons []reason `json:"CancellationReasons"`
	}{DynamoDBNamespace + "#TransactionCanceledException",
		"Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]", reasons})
	if err != nil {
		panic(err) // strings always marshal
	}
	return JSONResponse(400, body)
}

// SQSError is a failed SQS call: AWS JSON 1.0 in query-compatible mode. The
// body's __type is SQSNamespace#shape (the modeled error, such as
// QueueDoesNotExist, or the common error's code); the header
// x-amzn-query-error is "queryCode;Sender", or ";Receiver" for a 5xx status.
// An empty queryCode is shape.
func SQSError(status int, shape, queryCode, message string) Response {
	if queryCode == "" {
		queryCode = shape
	}
	r := JSONError(status, SQSNamespace+"#"+shape, message)
	r.Header.Del("X-Amz-Crc32")
	fault := "Sender"
	if status >= 500 {
		fault = "Receiver"
	}
	r.Header.Set("X-Amzn-Query-Error", queryCode+";"+fault)
	return r
}

// S3Error is a failed S3 call in REST-XML: the status, Content-Type
// application/xml, x-amz-request-id, x-amz-id-2 and an <Error> document with
// Code, Message, RequestId and HostId.
func S3Error(status int, code, message string) Response {
	id := requestID()
	host := "fakeaws/" + id
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<Error>")
	for _, f := range [][2]string{{"Code", code}, {"Message", message}, {"RequestId", id}, {"HostId", host}} {
		b.WriteString("<" + f[0] + ">")
		_ = xml.EscapeText(&b, []byte(f[1])) // writes to a bytes.Buffer never fail
		b.WriteString("</" + f[0] + ">")
	}
	b.WriteString("</Error>")
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("X-Amz-Request-Id", id)
	h.Set("X-Amz-Id-2", host)
	return Response{Status: status, Header: h, Body: b.Bytes()}
}

// S3Error200 is S3Error with HTTP 200: S3 answers so when a CopyObject,
// UploadPartCopy or CompleteMultipartUpload fails after the response started.
func S3Error200(code, message string) Response {
	return S3Error(http.StatusOK, code, message)
}

// Reset reads the request and then resets the connection (TCP RST, no
// response byte): the client reads "connection reset by peer".
func Reset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := hijack(w, r)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST
		}
		_ = conn.Close()
	})
}

// CloseConn reads the request and then closes the connection without a
// response byte: the client reads EOF.
func CloseConn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = hijack(w, r).Close()
	})
}

// Truncated sends resp's status line and headers, with the Content-Length of
// its whole body, then only the body's first n bytes (at most all but one),
// and closes the connection: the client reads an unexpected EOF.
func Truncated(resp Response, n int) http.Handler { return cut(resp, n, false) }

// ResetMidBody is Truncated, but the connection is reset (TCP RST) after
// the body's first n bytes instead of closed: the client reads "connection
// reset by peer" in the middle of the body.
func ResetMidBody(resp Response, n int) http.Handler { return cut(resp, n, true) }

// cut sends resp with its body cut after n bytes, then closes the
// connection, or resets it.
func cut(resp Response, n int, reset bool) http.Handler {
	n = max(0, min(n, len(resp.Body)-1))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := hijack(w, r)
		defer conn.Close()
		if tc, ok := conn.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0) // close sends RST
		}
		h := resp.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
		var b bytes.Buffer
		fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", resp.Status, http.StatusText(resp.Status))
		_ = h.Write(&b) // writes to a bytes.Buffer never fail
		b.WriteString("\r\n")
		b.Write(resp.Body[:n])
		_, _ = conn.Write(b.Bytes())
	})
}

// Hang never answers: it returns, dropping the connection, once the client
// gives up (its timeout or context deadline) or the server closes.
func Hang() http.Handler {
	return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		panic(http.ErrAbortHandler) // drop the connection without a response
	})
}

// hijack reads the request body and takes the connection over. If the
// connection cannot be taken over, the handler is aborted, which also drops
// the connection without a response.
func hijack(w http.ResponseWriter, r *http.Request) net.Conn {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	return conn
}
