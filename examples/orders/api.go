package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// ALBIdentityHeader is the header that scopes the idempotency keys of
// orders-alb: the subject of the user an ALB listener rule authenticated
// (authenticate-oidc or authenticate-cognito), which the ALB sets.
const ALBIdentityHeader = "x-amzn-oidc-identity"

// NewAPI returns orders-api's handler: POST /orders behind an API Gateway
// HTTP API, made idempotent by idemlambda.HTTPAPI (the Idempotency-Key
// header is required).
func NewAPI(d Deps) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	if d.Orders == nil {
		return nil, errors.New("orders: no orders table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	return idemlambda.HTTPAPI(r, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		a, err := placeOrder(ctx, d, apiRequest{
			method: req.RequestContext.HTTP.Method, path: req.RawPath, body: req.Body, base64: req.IsBase64Encoded,
			header: func(name string) string { return header(req.Headers, nil, name) },
		})
		return events.APIGatewayV2HTTPResponse{StatusCode: a.status, Headers: a.headers, Body: a.body}, err
	})
}

// NewALB returns orders-alb's handler: the same POST /orders behind an
// Application Load Balancer target group, made idempotent by idemlambda.ALB
// and keyed per authenticated user (ALBIdentityHeader). It answers in the
// header mode of the request (multi-value headers or not).
func NewALB(d Deps) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	if d.Orders == nil {
		return nil, errors.New("orders: no orders table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	return idemlambda.ALB(r, func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		a, err := placeOrder(ctx, d, apiRequest{
			method: req.HTTPMethod, path: req.Path, body: req.Body, base64: req.IsBase64Encoded,
			header: func(name string) string { return header(req.Headers, req.MultiValueHeaders, name) },
		})
		resp := events.ALBTargetGroupResponse{StatusCode: a.status, StatusDescription: fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)), Body: a.body}
		if len(req.MultiValueHeaders) == 0 {
			resp.Headers = a.headers
			return resp, err
		}
		resp.MultiValueHeaders = map[string][]string{}
		for k, v := range a.headers {
			resp.MultiValueHeaders[k] = []string{v}
		}
		return resp, err
	}, idemlambda.WithIdentityHeader(ALBIdentityHeader))
}

// apiRequest is what POST /orders reads of a request, whichever event
// carried it.
type apiRequest struct {
	method, path string
	header       func(name string) string
	body         string
	base64       bool
}

// apiAnswer is POST /orders' answer, before it takes an event's response
// type.
type apiAnswer struct {
	status  int
	headers map[string]string
	body    string
}

func placeOrder(ctx context.Context, d Deps, req apiRequest) (apiAnswer, error) {
	if req.method != http.MethodPost || req.path != "/orders" {
		return jsonAnswer(http.StatusNotFound, map[string]string{"error": "no such route"}), nil
	}
	if d.TestHooks {
		if path := req.header("x-test-hold-file"); path != "" {
			if err := holdUntilExists(ctx, path); err != nil {
				return apiAnswer{}, err
			}
		}
		if code, err := strconv.Atoi(req.header("x-test-fail")); err == nil && code >= 500 && code <= 599 {
			return jsonAnswer(code, map[string]string{"error": "test hook: failing with " + strconv.Itoa(code)}), nil
		}
	}
	in, msg := readOrder(req)
	if msg != "" {
		return jsonAnswer(http.StatusBadRequest, map[string]string{"error": msg}), nil
	}
	// The order id is the execution's downstream key for "order", derived
	// from the request's stored idempotency key, not from a random draw: a
	// run repeated after a failure (the message not sent, say) writes the
	// same order again instead of a second one, and sends the same event id,
	// which the consumer uses as its own idempotency key.
	id, err := idem.DownstreamKey(ctx, "order")
	if err != nil {
		return apiAnswer{}, fmt.Errorf("orders: %w", err)
	}
	o := Order{OrderID: orderIDPrefix + id[:16], CustomerID: in.CustomerID, Items: in.Items, PlacedAt: time.Now().UTC()}
	for _, it := range in.Items {
		o.AmountCents += it.Qty * it.PriceCents
	}
	if err := d.Orders.PutOrder(ctx, o); err != nil {
		return apiAnswer{}, err
	}
	if d.Publisher != nil {
		ev := OrderPlaced{Type: "OrderPlaced", EventID: "evt_" + o.OrderID[len("ord_"):], OrderID: o.OrderID, CustomerID: o.CustomerID, AmountCents: o.AmountCents}
		if err := d.Publisher.Publish(ctx, ev); err != nil {
			return apiAnswer{}, err
		}
	}
	a := jsonAnswer(http.StatusCreated, Placed{OrderID: o.OrderID, Status: "placed", AmountCents: o.AmountCents})
	a.headers["Location"] = "/orders/" + o.OrderID
	return a, nil
}

// readOrder decodes and checks the body; msg says what is wrong with it.
func readOrder(req apiRequest) (in PlaceOrder, msg string) {
	body, err := idemlambda.DecodeBody(req.body, req.base64)
	if err != nil { // the wrapper refuses such a body before the handler runs
		return in, "body is not valid base64"
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return in, "body is not a JSON order: " + err.Error()
	}
	return in, in.validate()
}

// header returns the first value of the header name (any case) in a
// request's single- or multi-valued headers.
func header(h map[string]string, multi map[string][]string, name string) string {
	for k, vs := range multi {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func jsonAnswer(status int, v any) apiAnswer {
	b, _ := json.Marshal(v) // the example's bodies always marshal
	return apiAnswer{status: status, headers: map[string]string{"Content-Type": "application/json"}, body: string(b)}
}

func (p PlaceOrder) validate() string {
	if p.CustomerID == "" {
		return "customer_id is required"
	}
	if len(p.Items) == 0 {
		return "an order needs at least one item"
	}
	for i, it := range p.Items {
		if it.SKU == "" || it.Qty < 1 || it.PriceCents < 0 {
			return fmt.Sprintf("item %d needs a sku, a qty of at least 1 and a price_cents of at least 0", i)
		}
	}
	return ""
}

// APIFromEnv builds orders-api's handler from the environment (APIEnv) and
// the AWS SDK's default configuration (region, credentials, endpoints such as
// AWS_ENDPOINT_URL_DYNAMODB).
func APIFromEnv(ctx context.Context) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	d, err := apiDepsFromEnv(ctx, "orders-api")
	if err != nil {
		return nil, err
	}
	return NewAPI(d)
}

// ALBFromEnv builds orders-alb's handler from the environment (APIEnv, as
// orders-api) and the AWS SDK's default configuration.
func ALBFromEnv(ctx context.Context) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	d, err := apiDepsFromEnv(ctx, "orders-alb")
	if err != nil {
		return nil, err
	}
	return NewALB(d)
}

func apiDepsFromEnv(ctx context.Context, function string) (Deps, error) {
	cfg, err := ConfigFromEnv(os.Getenv, APIEnv)
	if err != nil {
		return Deps{}, err
	}
	d, err := awsDeps(ctx, cfg, function)
	if err != nil {
		return Deps{}, err
	}
	if cfg.QueueURL == "" {
		d.Logger.Warn("ORDERS_QUEUE_URL is empty: no OrderPlaced messages will be sent")
	}
	return d, nil
}

// holdUntilExists waits until a file exists at path (the X-Test-Hold-File hook), or ctx
// ends.
func holdUntilExists(ctx context.Context, path string) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("orders: test hook: %s never appeared: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
