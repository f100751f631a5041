package test

import (
	"encoding/json"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
)

// node is a view of a yaml.Node that keeps intrinsic-function tags (!Ref,
// !GetAtt, !Sub) and looks mapping keys up by dotted path.
type node struct {
	n    *yaml.Node
	path string
}

func (x node) get(t *testing.T, path string) node {
	t.Helper()
	cur := x
	for _, k := range strings.Split(path, ".") {
		next, ok := cur.lookup(k)
		if !ok {
			t.Fatalf("template: %s has no %q", cur.path, k)
		}
		cur = next
	}
	return cur
}

func (x node) lookup(k string) (node, bool) {
	n := x.n
	if n == nil || n.Kind != yaml.MappingNode {
		return node{}, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return node{n: n.Content[i+1], path: x.path + "." + k}, true
		}
	}
	return node{}, false
}

func (x node) str(t *testing.T) string {
	t.Helper()
	if x.n.Kind != yaml.ScalarNode {
		t.Fatalf("template: %s is not a scalar", x.path)
	}
	return x.n.Value
}

// ref returns the target of a !Ref or !GetAtt, as "!Ref X" or "!GetAtt X.Arn".
func (x node) ref() string {
	if x.n == nil || x.n.Kind != yaml.ScalarNode || (x.n.Tag != "!Ref" && x.n.Tag != "!GetAtt") {
		return ""
	}
	return x.n.Tag + " " + x.n.Value
}

func (x node) list(t *testing.T) []node {
	t.Helper()
	if x.n.Kind != yaml.SequenceNode {
		t.Fatalf("template: %s is not a list", x.path)
	}
	var out []node
	for i, c := range x.n.Content {
		out = append(out, node{n: c, path: fmt.Sprintf("%s[%d]", x.path, i)})
	}
	return out
}

func (x node) strs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range x.list(t) {
		out = append(out, e.str(t))
	}
	return out
}

func (x node) keys() []string {
	var out []string
	for i := 0; x.n != nil && x.n.Kind == yaml.MappingNode && i+1 < len(x.n.Content); i += 2 {
		out = append(out, x.n.Content[i].Value)
	}
	return out
}

func loadTemplate(t *testing.T) (node, string) {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		t.Fatal("template.yaml: not one YAML document")
	}
	return node{n: doc.Content[0], path: "template"}, root
}

// function describes what the template must deploy for one function.
type function struct {
	resource string
	pkg      string          // main package, relative to the repository root
	env      []orders.EnvVar // what the code reads
	envRefs  map[string]string
	grants   map[string][]string // resource reference → actions
}

var functions = []function{
	{
		resource: "OrdersApiFunction", pkg: "examples/orders/cmd/orders-api", env: orders.APIEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvOrdersTable: "!Ref OrdersTable", orders.EnvQueueURL: "!Ref OrdersQueue"},
		grants: map[string][]string{
			"!GetAtt IdempotencyTable.Arn": {"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			"!GetAtt OrdersTable.Arn":      {"dynamodb:PutItem"},
			"!GetAtt OrdersQueue.Arn":      {"sqs:SendMessage"},
		},
	},
	{
		resource: "OrdersConsumerFunction", pkg: "examples/orders/cmd/orders-consumer", env: orders.ConsumerEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvLedgerTable: "!Ref LedgerTable"},
		grants: map[string][]string{
			"!GetAtt IdempotencyTable.Arn": {"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			"!GetAtt LedgerTable.Arn":      {"dynamodb:PutItem"},
		},
	},
	{
		resource: "OrdersStreamFunction", pkg: "examples/orders/cmd/orders-stream", env: orders.StreamEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvAuditTable: "!Ref AuditTable"},
		grants: map[string][]string{
			"!GetAtt IdempotencyTable.Arn": {"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			"!GetAtt AuditTable.Arn":       {"dynamodb:PutItem"},
		},
	},
}

func TestTemplateTransform(t *testing.T) {
	tpl, _ := loadTemplate(t)
	if got := tpl.get(t, "Transform").str(t); got != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform = %q", got)
	}
	g := tpl.get(t, "Globals.Function")
	for k, want := range map[string]string{"Runtime": "provided.al2023", "Handler": "bootstrap"} {
		if got := g.get(t, k).str(t); got != want {
			t.Errorf("Globals.Function.%s = %q want %q", k, got, want)
		}
	}
	if got := g.get(t, "Architectures").strs(t); !slices.Equal(got, []string{"arm64"}) {
		t.Errorf("Architectures = %v want [arm64]", got)
	}
}

func TestTemplateTables(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")
	tests := []struct {
		resource, key, ttl string
	}{
		{"IdempotencyTable", ddbstore.DefaultKeyAttribute, ddbstore.DefaultTTLAttribute},
		{"OrdersTable", orders.OrdersKeyAttr, ""},
		{"LedgerTable", orders.LedgerKeyAttr, ""},
		{"AuditTable", orders.AuditKeyAttr, ""},
	}
	for _, tc := range tests {
		t.Run(tc.resource, func(t *testing.T) {
			tbl := res.get(t, tc.resource)
			if got := tbl.get(t, "Type").str(t); got != "AWS::DynamoDB::Table" {
				t.Fatalf("Type = %q", got)
			}
			p := tbl.get(t, "Properties")
			if got := p.get(t, "BillingMode").str(t); got != "PAY_PER_REQUEST" {
				t.Errorf("BillingMode = %q", got)
			}
			ks := p.get(t, "KeySchema").list(t)
			if len(ks) != 1 || ks[0].get(t, "AttributeName").str(t) != tc.key || ks[0].get(t, "KeyType").str(t) != "HASH" {
				t.Errorf("KeySchema is not a single HASH key %q", tc.key)
			}
			ad := p.get(t, "AttributeDefinitions").list(t)
			if len(ad) != 1 || ad[0].get(t, "AttributeName").str(t) != tc.key || ad[0].get(t, "AttributeType").str(t) != "S" {
				t.Errorf("AttributeDefinitions do not define %q as a string only", tc.key)
			}
			ttl, ok := p.lookup("TimeToLiveSpecification")
			switch {
			case tc.ttl == "" && ok:
				t.Errorf("unexpected TimeToLiveSpecification")
			case tc.ttl != "" && !ok:
				t.Errorf("no TimeToLiveSpecification: records past retention would never be deleted")
			case tc.ttl != "":
				if got := ttl.get(t, "AttributeName").str(t); got != tc.ttl {
					t.Errorf("TTL attribute = %q, want ddbstore's %q", got, tc.ttl)
				}
				if got := ttl.get(t, "Enabled").str(t); got != "true" {
					t.Errorf("TTL Enabled = %q", got)
				}
			}
		})
	}
}

func TestTemplateFunctions(t *testing.T) {
	tpl, root := loadTemplate(t)
	res := tpl.get(t, "Resources")
	for _, fn := range functions {
		t.Run(fn.resource, func(t *testing.T) {
			r := res.get(t, fn.resource)
			if got := r.get(t, "Type").str(t); got != "AWS::Serverless::Function" {
				t.Fatalf("Type = %q", got)
			}
			if got := r.get(t, "Metadata.BuildMethod").str(t); got != "go1.x" {
				t.Errorf("Metadata.BuildMethod = %q want go1.x", got)
			}
			p := r.get(t, "Properties")
			codeURI := p.get(t, "CodeUri").str(t)
			if filepath.ToSlash(filepath.Clean(codeURI)) != fn.pkg {
				t.Errorf("CodeUri = %q want %q", codeURI, fn.pkg)
			}
			pkg, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(codeURI)), 0)
			if err != nil {
				t.Fatalf("CodeUri %s: %v", codeURI, err)
			}
			if pkg.Name != "main" || !slices.Contains(pkg.Imports, "github.com/aws/aws-lambda-go/lambda") {
				t.Errorf("CodeUri %s is package %s importing %v; want a main package that calls lambda.Start", codeURI, pkg.Name, pkg.Imports)
			}

			// Environment: every variable set is one the code reads, every
			// required one is set, table names come from the template's own
			// resources, and the test hooks stay off.
			vars := p.get(t, "Environment.Variables")
			read := map[string]bool{}
			for _, v := range fn.env {
				read[v.Name] = true
				if _, ok := vars.lookup(v.Name); v.Required && !ok {
					t.Errorf("required %s is not set", v.Name)
				}
			}
			for _, k := range vars.keys() {
				if !read[k] {
					t.Errorf("environment variable %s is set but the function does not read it", k)
				}
			}
			if _, ok := vars.lookup(orders.EnvTestHooks); ok {
				t.Errorf("%s is set: the test hooks must stay off in a deployment", orders.EnvTestHooks)
			}
			for name, want := range fn.envRefs {
				if v, ok := vars.lookup(name); !ok || v.ref() != want {
					t.Errorf("%s = %v, want %s", name, v.ref(), want)
				}
			}

			// Policies: exactly the grants the code needs, on named resources.
			got := map[string][]string{}
			for _, pol := range p.get(t, "Policies").list(t) {
				for _, st := range pol.get(t, "Statement").list(t) {
					if st.get(t, "Effect").str(t) != "Allow" {
						continue
					}
					target := st.get(t, "Resource").ref()
					if target == "" {
						t.Errorf("%s grants on %q: want a !GetAtt of a resource of this template", st.path, st.get(t, "Resource").n.Value)
						continue
					}
					got[target] = append(got[target], st.get(t, "Action").strs(t)...)
				}
			}
			for target := range got {
				slices.Sort(got[target])
			}
			if fmt.Sprint(got) != fmt.Sprint(fn.grants) {
				t.Errorf("grants = %v\nwant %v", got, fn.grants)
			}
		})
	}
}

func TestTemplateEvents(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")

	api := res.get(t, "OrdersApiFunction.Properties.Events.PlaceOrder")
	if api.get(t, "Type").str(t) != "HttpApi" || api.get(t, "Properties.Path").str(t) != "/orders" || api.get(t, "Properties.Method").str(t) != "POST" {
		t.Errorf("PlaceOrder is not an HTTP API route POST /orders")
	}

	sqs := res.get(t, "OrdersConsumerFunction.Properties.Events.OrdersQueueEvent")
	if got := sqs.get(t, "Type").str(t); got != "SQS" {
		t.Fatalf("consumer event Type = %q", got)
	}
	if got := sqs.get(t, "Properties.Queue").ref(); got != "!GetAtt OrdersQueue.Arn" {
		t.Errorf("consumer Queue = %q", got)
	}
	if got := sqs.get(t, "Properties.FunctionResponseTypes").strs(t); !slices.Equal(got, []string{"ReportBatchItemFailures"}) {
		t.Errorf("FunctionResponseTypes = %v: without ReportBatchItemFailures, Lambda ignores the reported failures and deletes the whole batch", got)
	}

	q := res.get(t, "OrdersQueue.Properties")
	if got := q.get(t, "RedrivePolicy.deadLetterTargetArn").ref(); got != "!GetAtt OrdersDeadLetterQueue.Arn" {
		t.Errorf("deadLetterTargetArn = %q", got)
	}
	if n, err := strconv.Atoi(q.get(t, "RedrivePolicy.maxReceiveCount").str(t)); err != nil || n < 1 {
		t.Errorf("maxReceiveCount = %v, %v", n, err)
	}
	vis, err := strconv.Atoi(q.get(t, "VisibilityTimeout").str(t))
	timeout, err2 := strconv.Atoi(res.get(t, "OrdersConsumerFunction.Properties.Timeout").str(t))
	if err != nil || err2 != nil || vis < 6*timeout {
		t.Errorf("queue VisibilityTimeout %d is below 6 x the consumer's Timeout %d", vis, timeout)
	}
}

// TestTemplateOrdersStream: orders-stream reads the orders table's stream
// with the settings its checkpoints need: the stream carries the new image
// (the audit entry and the item keys come from it), failures are reported
// per record, a batch is bisected around a failure, retries are bounded and
// what is given up goes to a queue, and only INSERT records are delivered
// (under item keys, a later change of an order would be a reused key).
func TestTemplateOrdersStream(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")
	if got := res.get(t, "OrdersTable.Properties.StreamSpecification.StreamViewType").str(t); got != "NEW_IMAGE" && got != "NEW_AND_OLD_IMAGES" {
		t.Errorf("orders table StreamViewType = %q, want one with the new image", got)
	}
	ev := res.get(t, "OrdersStreamFunction.Properties.Events.OrdersStream")
	if got := ev.get(t, "Type").str(t); got != "DynamoDB" {
		t.Fatalf("orders-stream event Type = %q", got)
	}
	p := ev.get(t, "Properties")
	if got := p.get(t, "Stream").ref(); got != "!GetAtt OrdersTable.StreamArn" {
		t.Errorf("Stream = %q, want the orders table's stream", got)
	}
	if got := p.get(t, "FunctionResponseTypes").strs(t); !slices.Equal(got, []string{"ReportBatchItemFailures"}) {
		t.Errorf("FunctionResponseTypes = %v: without ReportBatchItemFailures, Lambda ignores the checkpoint and retries the whole batch", got)
	}
	if got := p.get(t, "BisectBatchOnFunctionError").str(t); got != "true" {
		t.Errorf("BisectBatchOnFunctionError = %q, want true", got)
	}
	if n, err := strconv.Atoi(p.get(t, "MaximumRetryAttempts").str(t)); err != nil || n < 1 {
		t.Errorf("MaximumRetryAttempts = %v, %v: want a bound, or a poison record blocks its shard until it expires", n, err)
	}
	if got := p.get(t, "StartingPosition").str(t); got != "TRIM_HORIZON" && got != "LATEST" {
		t.Errorf("StartingPosition = %q", got)
	}
	onFailure := p.get(t, "DestinationConfig.OnFailure")
	if got := onFailure.get(t, "Destination").ref(); got != "!GetAtt OrdersStreamFailureQueue.Arn" {
		t.Errorf("OnFailure destination = %q", got)
	}
	if got := onFailure.get(t, "Type").str(t); got != "SQS" {
		t.Errorf("OnFailure Type = %q, want SQS (SAM then grants sqs:SendMessage on it)", got)
	}
	if got := res.get(t, "OrdersStreamFailureQueue.Type").str(t); got != "AWS::SQS::Queue" {
		t.Errorf("OrdersStreamFailureQueue Type = %q", got)
	}
	filters := p.get(t, "FilterCriteria.Filters").list(t)
	if len(filters) != 1 {
		t.Fatalf("%d filters, want 1", len(filters))
	}
	var pattern map[string][]string
	if err := json.Unmarshal([]byte(filters[0].get(t, "Pattern").str(t)), &pattern); err != nil || !slices.Equal(pattern["eventName"], []string{"INSERT"}) || len(pattern) != 1 {
		t.Errorf("filter pattern = %v, %v; want eventName INSERT only", pattern, err)
	}
}
