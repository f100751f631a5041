package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// inspect finds the records of scoped keys as the wrappers stored them:
// --tenant for an invocation's tenant id (tenant isolation mode),
// --group-tenant for a fair queue's message group; without them, it does
// not. A request whose caller the wrapper cannot identify has no record.
func TestInspectScopedKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runner, err := idem.New(f.store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "r-1", TenantID: "blue"})
	req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: map[string]string{"idempotency-key": "k-tenant-1"}, Body: `{}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"}}}
	httpH, err := idemlambda.HTTPAPI(runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := httpH(ctx, req); err != nil || r.StatusCode != 201 {
		t.Fatalf("HTTP API: %+v %v", r, err)
	}
	msg := events.SQSMessage{MessageId: "m-1", Body: `{"event_id":"e-1"}`, Attributes: map[string]string{"MessageGroupId": "tenant-a"}}
	sqsH, err := idemlambda.SQS(runner, "notify", idemlambda.KeyFromBodyField("event_id"),
		func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }, idemlambda.WithMessageGroupTenant())
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := sqsH(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) > 0 {
		t.Fatalf("SQS: %+v", resp)
	}
	raw, _ := json.Marshal(req)
	httpFile := writeFile(t, "req.json", string(raw))
	raw, _ = json.Marshal(events.SQSEvent{Records: []events.SQSMessage{msg}})
	sqsFile := writeFile(t, "event.json", string(raw))
	unidentified := req
	unidentified.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"stringKey": "v"}}
	raw, _ = json.Marshal(unidentified)
	unidentifiedFile := writeFile(t, "unidentified.json", string(raw))
	sqsSel := []string{"--sqs-event", sqsFile, "--key-source", "body:event_id", "--action", "notify"}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"http with the tenant", []string{"--http-event", httpFile, "--kind", "httpapi", "--tenant", "blue"}, exitOK},
		{"http without the tenant", []string{"--http-event", httpFile, "--kind", "httpapi"}, exitNotFound},
		{"http with another tenant", []string{"--http-event", httpFile, "--kind", "httpapi", "--tenant", "green"}, exitNotFound},
		{"sqs with the group tenant", append([]string{"--group-tenant"}, sqsSel...), exitOK},
		{"sqs without the group tenant", sqsSel, exitNotFound},
		{"group tenant without an sqs event", []string{"--group-tenant", "--http-event", httpFile, "--kind", "httpapi"}, exitUsage},
		{"unidentified caller", []string{"--http-event", unidentifiedFile, "--kind", "httpapi"}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCmd(t, tc.code, time.Now(), nil, append([]string{"inspect", "--table", f.table}, tc.args...)...)
			if tc.code == exitOK && !strings.Contains(r.stdout, "state:        succeeded") {
				t.Errorf("inspect:\n%s\nwant the succeeded record", r.stdout)
			}
		})
	}
}
