package awsclassify_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeaws"
)

// These tests call real SDK clients against a fakeaws server that answers
// with each service's wire shape, and classify the error the client returns.

const (
	T = core.Transient
	P = core.Permanent
	U = core.Unknown
	C = core.Unclassified // the full chain's answer when no classifier knows the error
)

// call makes one SDK call with cfg and returns its error.
type call func(ctx context.Context, cfg aws.Config) error

// config is a client configuration for endpoint: static credentials, one
// attempt (so the answer the server gives is the error the call returns).
func config(endpoint string) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint:     aws.String(endpoint),
		RetryMaxAttempts: 1,
	}
}

func getItem(ctx context.Context, cfg aws.Config) error {
	_, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("idem"),
		Key:       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "evt:1:charge"}},
	})
	return err
}

func putItem(ctx context.Context, cfg aws.Config) error {
	_, err := dynamodb.NewFromConfig(cfg).PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String("idem"),
		Item:                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "evt:1:charge"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return err
}

func sendMessage(ctx context.Context, cfg aws.Config) error {
	_, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(*cfg.BaseEndpoint + "/000000000000/idem"),
		MessageBody: aws.String(`{"id":"evt-1"}`),
	})
	return err
}

func s3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

func getObject(ctx context.Context, cfg aws.Config) error {
	out, err := s3Client(cfg).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("idem-bucket"), Key: aws.String("results/evt-1")})
	if err == nil {
		_ = out.Body.Close()
	}
	return err
}

func putObject(ctx context.Context, cfg aws.Config) error {
	_, err := s3Client(cfg).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("idem-bucket"), Key: aws.String("results/evt-1"), Body: strings.NewReader(`{"ok":true}`),
	})
	return err
}

func copyObject(ctx context.Context, cfg aws.Config) error {
	_, err := s3Client(cfg).CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: aws.String("idem-bucket"), Key: aws.String("results/evt-1.copy"), CopySource: aws.String("idem-bucket/results/evt-1"),
	})
	return err
}

// wireCase is one answer of a service and the verdicts on the error its
// client returns: awsclassify.Classify alone, and the whole chain
// awsclassify.Classifiers.
type wireCase struct {
	name   string
	call   call
	answer http.Handler
	aws    core.Class
	full   core.Class
	as     any // if set, a pointer to the SDK's typed error that errors.As must find
}

func runWire(t *testing.T, tests []wireCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.New(t, nil)
			srv.Queue(tc.answer)
			err := tc.call(context.Background(), config(srv.URL))
			if err == nil {
				t.Fatal("call succeeded; want an error")
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			checkClasses(t, err, tc.aws, tc.full)
			if tc.as != nil && !errors.As(err, tc.as) {
				t.Errorf("errors.As(%T) = false for %v", tc.as, err)
			}
		})
	}
}

func checkClasses(t *testing.T, err error, alone, full core.Class) {
	t.Helper()
	if got := awsclassify.Classify(err); got != alone {
		t.Errorf("awsclassify.Classify = %v want %v; err = %v", got, alone, err)
	}
	if got := core.Classify(err, awsclassify.Classifiers...); got != full {
		t.Errorf("core.Classify(err, awsclassify.Classifiers...) = %v want %v; err = %v", got, full, err)
	}
	wantMarked := alone
	if alone != T {
		wantMarked = full
	}
	if got := core.Classify(awsclassify.Mark(err), core.DefaultClassifiers...); got != wantMarked {
		t.Errorf("core.Classify(Mark(err), core.DefaultClassifiers...) = %v want %v", got, wantMarked)
	}
}

func TestClassifyDynamoDB(t *testing.T) {
	t.Parallel()
	ddb := fakeaws.DynamoDBError
	runWire(t, []wireCase{
		{"ProvisionedThroughputExceededException 400", putItem,
			ddb(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."),
			T, T, new(*ddbtypes.ProvisionedThroughputExceededException)},
		{"ThrottlingException 400", putItem,
			ddb(400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput."), T, T, nil},
		{"RequestLimitExceeded 400", getItem,
			ddb(400, "RequestLimitExceeded", "Throughput exceeds the current throughput limit for your account."),
			T, T, new(*ddbtypes.RequestLimitExceeded)},
		{"TransactionInProgressException 400", putItem,
			ddb(400, "TransactionInProgressException", "The transaction with the given request token is already in progress."), T, T, nil},
		{"InternalServerError 500", getItem,
			ddb(500, "InternalServerError", "Internal server error"), T, T, new(*ddbtypes.InternalServerError)},
		{"ServiceUnavailable 503", getItem,
			ddb(503, "com.amazon.coral.availability#ServiceUnavailableException", "Service Unavailable"), T, T, nil},
		{"ValidationException 400", putItem,
			ddb(400, "com.amazon.coral.validate#ValidationException", "One or more parameter values were invalid: Missing the key sk in the item"), U, P, nil},
		{"ConditionalCheckFailedException 400", putItem,
			ddb(400, "ConditionalCheckFailedException", "The conditional request failed"),
			U, P, new(*ddbtypes.ConditionalCheckFailedException)},
		{"ResourceNotFoundException 400", getItem,
			ddb(400, "ResourceNotFoundException", "Requested resource not found"),
			U, P, new(*ddbtypes.ResourceNotFoundException)},
		{"AccessDeniedException 400", getItem,
			ddb(400, "com.amazon.coral.service#AccessDeniedException", "User: arn:aws:iam::000000000000:user/x is not authorized to perform: dynamodb:GetItem"), U, P, nil},
		{"CRC32 mismatch on 200", getItem, crcMismatch(), T, T, nil},
	})
}

// crcMismatch is a successful GetItem whose X-Amz-Crc32 does not match its
// body: the DynamoDB client fails the call with an error that says it is
// retryable (the body was corrupted in transit).
func crcMismatch() http.Handler {
	r := fakeaws.JSONResponse(200, []byte(`{"Item":{"pk":{"S":"evt:1:charge"}}}`))
	r.Header.Set("X-Amz-Crc32", "1")
	return r
}

func TestClassifySQS(t *testing.T) {
	t.Parallel()
	q := fakeaws.SQSError
	runWire(t, []wireCase{
		{"ThrottlingException 400", sendMessage, q(400, "ThrottlingException", "", "Rate exceeded"), T, T, nil},
		{"RequestThrottled 403", sendMessage,
			q(403, "RequestThrottled", "", "Request is throttled."), T, T, new(*sqstypes.RequestThrottled)},
		{"InternalError 500", sendMessage, q(500, "InternalError", "", "We encountered an internal error. Please try again."), T, T, nil},
		{"ServiceUnavailable 503", sendMessage, q(503, "ServiceUnavailable", "", "Service is unavailable. Try again later."), T, T, nil},
		{"InvalidParameterValue 400", sendMessage,
			q(400, "InvalidParameterValue", "", "Value for parameter MessageBody is invalid."), U, P, nil},
		{"QueueDoesNotExist 400", sendMessage,
			q(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."),
			U, P, new(*sqstypes.QueueDoesNotExist)},
		{"AccessDenied 403", sendMessage,
			q(403, "AccessDenied", "", "Access to the resource https://sqs.us-east-1.amazonaws.com/000000000000/idem is denied."), U, P, nil},
	})
}

func TestClassifyS3(t *testing.T) {
	t.Parallel()
	s := fakeaws.S3Error
	runWire(t, []wireCase{
		{"SlowDown 503", putObject, s(503, "SlowDown", "Please reduce your request rate."), T, T, nil},
		{"InternalError 500", getObject, s(500, "InternalError", "We encountered an internal error. Please try again."), T, T, nil},
		{"ServiceUnavailable 503", getObject, s(503, "ServiceUnavailable", "Service is unable to handle request."), T, T, nil},
		{"RequestTimeout 400", putObject,
			s(400, "RequestTimeout", "Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed."),
			T, T, nil},
		{"InternalError in a 200 CopyObject", copyObject,
			fakeaws.S3Error200("InternalError", "We encountered an internal error. Please try again."), T, T, nil},
		{"AccessDenied 403", getObject, s(403, "AccessDenied", "Access Denied"), U, P, nil},
		{"NoSuchKey 404", getObject, s(404, "NoSuchKey", "The specified key does not exist."), U, P, new(*s3types.NoSuchKey)},
		{"NoSuchBucket 404", putObject, s(404, "NoSuchBucket", "The specified bucket does not exist"), U, P, nil},
	})
}

// transportCase is a transport fault: do makes the call and returns its
// error.
type transportCase struct {
	name string
	do   func(t *testing.T) error
	aws  core.Class
	full core.Class
}

// answered calls a fakeaws server that gives answer, with the client
// configuration changed by edit (if not nil) and within ctx.
func answered(answer http.Handler, edit func(*aws.Config), c call) func(t *testing.T) error {
	return func(t *testing.T) error {
		srv := fakeaws.New(t, nil)
		srv.Queue(answer)
		cfg := config(srv.URL)
		if edit != nil {
			edit(&cfg)
		}
		return c(context.Background(), cfg)
	}
}

func TestClassifyTransport(t *testing.T) {
	t.Parallel()
	okItem := fakeaws.JSONResponse(200, []byte(`{"Item":{"pk":{"S":"evt:1:charge"},"state":{"S":"succeeded"}}}`))
	throttle400 := fakeaws.DynamoDBError(400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput.")
	conditional400 := fakeaws.DynamoDBError(400, "ConditionalCheckFailedException", "The conditional request failed")
	validation400 := fakeaws.DynamoDBError(400, "com.amazon.coral.validate#ValidationException", "One or more parameter values were invalid")
	tests := []transportCase{
		{"connection reset (DynamoDB)", answered(fakeaws.Reset(), nil, putItem), T, T},
		{"connection reset (S3)", answered(fakeaws.Reset(), nil, putObject), T, T},
		{"closed before the response: EOF", answered(fakeaws.CloseConn(), nil, getItem), T, T},
		// The SDK wraps the body's read error in a deserialization error,
		// which it does not call retryable; core.NetworkClassifier sees
		// io.ErrUnexpectedEOF in the chain.
		// A reply cut short is transient whatever its status: its error
		// code was never read (a 400 may as well have been a throttle),
		// and the SDK reports it as a deserialization error that it does
		// not retry.
		{"EOF mid-body", answered(fakeaws.Truncated(okItem, 20), nil, getItem), T, T},
		{"ThrottlingException 400 cut short", answered(fakeaws.Truncated(throttle400, 30), nil, putItem), T, T},
		{"ThrottlingException 400 reset mid-body", answered(fakeaws.ResetMidBody(throttle400, 30), nil, putItem), T, T},
		{"ConditionalCheckFailedException 400 cut short", answered(fakeaws.Truncated(conditional400, 40), nil, putItem), T, T},
		{"ValidationException 400 cut short", answered(fakeaws.Truncated(validation400, 10), nil, putItem), T, T},
		{"InternalServerError 500 cut short", answered(fakeaws.Truncated(fakeaws.DynamoDBError(500, "InternalServerError", "Internal server error"), 10), nil, getItem), T, T},
		{"S3 AccessDenied 403 cut short", answered(fakeaws.Truncated(fakeaws.S3Error(403, "AccessDenied", "Access Denied"), 60), nil, putObject), T, T},
		{"SQS InvalidParameterValue 400 cut short", answered(fakeaws.Truncated(fakeaws.SQSError(400, "InvalidParameterValue", "", "Value for parameter MessageBody is invalid."), 25), nil, sendMessage), T, T},
		{"client HTTP timeout", answered(fakeaws.Hang(), withHTTPTimeout(100*time.Millisecond), getItem), T, T},
		{"context deadline", deadline(100 * time.Millisecond), U, T},
		{"context canceled", canceled, U, C},
		{"connection refused", refused, T, T},
		{"DNS temporary failure", dnsFailure(&net.DNSError{Err: "server misbehaving", Name: "dynamodb.us-east-1.amazonaws.com", IsTemporary: true}), T, T},
		{"DNS timeout", dnsFailure(&net.DNSError{Err: "i/o timeout", Name: "dynamodb.us-east-1.amazonaws.com", IsTimeout: true}), T, T},
		{"DNS no such host", dnsFailure(&net.DNSError{Err: "no such host", Name: "dynamodb.nowhere.invalid", IsNotFound: true}), U, C},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.do(t)
			if err == nil {
				t.Fatal("call succeeded; want an error")
			}
			checkClasses(t, err, tc.aws, tc.full)
		})
	}
}

func withHTTPTimeout(d time.Duration) func(*aws.Config) {
	return func(cfg *aws.Config) { cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(d) }
}

// deadline calls a server that never answers with a context that expires.
func deadline(d time.Duration) func(t *testing.T) error {
	return func(t *testing.T) error {
		srv := fakeaws.New(t, nil)
		srv.Queue(fakeaws.Hang())
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		err := getItem(ctx, config(srv.URL))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("errors.Is(err, context.DeadlineExceeded) = false for %v", err)
		}
		return err
	}
}

// canceled calls a server that cancels the call's context once the request
// has arrived.
func canceled(t *testing.T) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := fakeaws.New(t, nil)
	srv.Queue(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		fakeaws.Hang().ServeHTTP(w, r)
	}))
	err := getItem(ctx, config(srv.URL))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = false for %v", err)
	}
	return err
}

// refused calls a port on 127.0.0.1 where nothing listens.
func refused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return getItem(context.Background(), config("http://"+addr))
}

// dnsFailure calls through a dialer that fails as a resolver does, with
// dnsErr wrapped as net.Dialer wraps it; nothing is sent.
func dnsFailure(dnsErr *net.DNSError) func(t *testing.T) error {
	return func(t *testing.T) error {
		cfg := config("http://dynamodb.us-east-1.amazonaws.com")
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.Proxy = nil
			tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}
			}
		})
		return getItem(context.Background(), cfg)
	}
}

func TestMark(t *testing.T) {
	t.Parallel()
	srv := fakeaws.New(t, nil)
	srv.Queue(
		fakeaws.DynamoDBError(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded."),
		fakeaws.DynamoDBError(400, "ConditionalCheckFailedException", "The conditional request failed"),
	)
	throttle := putItem(context.Background(), config(srv.URL))
	conditional := putItem(context.Background(), config(srv.URL))

	marked := awsclassify.Mark(throttle)
	var me *core.MarkedError
	if !errors.As(marked, &me) || me.Class != core.Transient {
		t.Fatalf("Mark(throttle) = %#v; want a transient mark", marked)
	}
	var pte *ddbtypes.ProvisionedThroughputExceededException
	if !errors.As(marked, &pte) || !errors.Is(marked, throttle) || marked.Error() != throttle.Error() {
		t.Errorf("the mark hides the SDK error: %v", marked)
	}
	if got := core.Classify(marked); got != core.Transient {
		t.Errorf("core.Classify(Mark(throttle)) with no chain = %v want transient", got)
	}

	permanent := core.MarkPermanent(throttle)
	wrapped := errors.Join(errors.New("handler"), core.MarkPermanent(throttle))
	alreadyTransient := core.MarkTransient(conditional)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"explicitly permanent", permanent},
		{"explicitly permanent, wrapped", wrapped},
		{"already marked", alreadyTransient},
		{"not transient", conditional},
		{"canceled", context.Canceled},
	} {
		if got := awsclassify.Mark(tc.err); got != tc.err {
			t.Errorf("%s: Mark(err) = %v, want err unchanged", tc.name, got)
		}
	}
	if got := core.Classify(awsclassify.Mark(permanent), awsclassify.Classifiers...); got != core.Permanent {
		t.Errorf("Mark overrode MarkPermanent: %v", got)
	}
}

func TestClassifiers(t *testing.T) {
	t.Parallel()
	if len(awsclassify.Classifiers) != 1+len(core.DefaultClassifiers) {
		t.Fatalf("len(Classifiers) = %d want %d", len(awsclassify.Classifiers), 1+len(core.DefaultClassifiers))
	}
	if got := awsclassify.Classify(nil); got != core.Unknown {
		t.Errorf("Classify(nil) = %v", got)
	}
	// The chain's first member is Classify; the rest is the default chain.
	probe := errors.New("plain")
	for i, c := range awsclassify.Classifiers[1:] {
		if c(probe) != core.DefaultClassifiers[i](probe) {
			t.Errorf("Classifiers[%d] differs from core.DefaultClassifiers[%d]", i+1, i)
		}
	}
}
