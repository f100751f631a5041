// Package fakeaws is an HTTP server for tests that answers as AWS services
// answer when they fail, so that real SDK clients (DynamoDB, SQS, S3, ...)
// can be pointed at it and the errors they return are the ones the world
// sends, not hand-built values.
//
// A Server listens on 127.0.0.1 (httptest) and gives each request the next
// queued answer, or its fallback once the queue is empty (with no fallback,
// an unexpected request fails the test). Point a client at it with
// aws.Config{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1",
// Credentials: static, RetryMaxAttempts: 1} (S3 also needs UsePathStyle).
// The fallback can be any handler, such as httputil.NewSingleHostReverseProxy
// to a local DynamoDB-API server, so that a test injects a fault into the
// first calls and lets the rest through.
//
// Answers are http.Handler values; Response is any complete answer. Wire
// shapes of a failed call:
//
//   - DynamoDBError, JSONError: AWS JSON 1.0, as DynamoDB sends it: the
//     status, Content-Type application/x-amz-json-1.0, x-amzn-RequestId,
//     X-Amz-Crc32 (the CRC-32 of the body, which the DynamoDB client checks)
//     and the body {"__type":"<namespace>#<Code>","message":"..."}. DynamoDB
//     sends a throttle as HTTP 400 with the code in __type. JSONResponse is
//     the same envelope around any body, such as a successful GetItem.
//   - SQSError: AWS JSON 1.0 in query-compatible mode, as SQS sends it:
//     the JSON error body (no X-Amz-Crc32) plus x-amzn-query-error:
//     <QueryCode>;Sender (Receiver for 5xx). The SQS client takes the error code from that header when it is
//     set (AWS.SimpleQueueService.NonExistentQueue for QueueDoesNotExist),
//     while the body's __type picks the modeled error type.
//   - S3Error: REST-XML, as S3 sends it: the status, Content-Type
//     application/xml, x-amz-request-id, x-amz-id-2 and
//     <Error><Code/><Message/><RequestId/><HostId/></Error>. S3Error200 sends
//     the same body with HTTP 200, as S3 does for a CopyObject or
//     CompleteMultipartUpload that fails after the response has started.
//
// Transport faults: Reset (the connection is reset after the request is
// read), CloseConn (closed before any response byte: the client reads EOF),
// Truncated (the headers and part of the body, then the connection closes:
// the client reads an unexpected EOF), ResetMidBody (the same, then a reset:
// the client reads a connection reset mid-body), and Hang (no answer until the client
// gives up or the server closes; for client timeouts and context deadlines).
//
// A Server is safe for concurrent use; the answers are stateless.
package fakeaws
