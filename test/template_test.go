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
	name     string          // the function's name after the stack's ("orders-api")
	role     string          // its IAM role's resource
	pkg      string          // main package, relative to the repository root
	env      []orders.EnvVar // what the code reads
	envRefs  map[string]string
	grants   []grant // what the code and its event sources need, statement by statement
	// sweeps: the function deletes every function's records past retention
	// (idem-sweep): a Scan and a DeleteItem on the whole idempotency table.
	sweeps bool
}

// grant is one statement of a function's role: actions on one resource (a
// !GetAtt of a resource of the template, or "*"), with the prefix of the keys
// it may touch (the condition dynamodb:LeadingKeys), if any.
type grant struct {
	sid, resource, leadingKeys string
	actions                    []string
}

// String is the grant as a line, for comparisons and messages.
func (g grant) String() string {
	s := fmt.Sprintf("%s: %s on %s", g.sid, strings.Join(g.actions, ","), g.resource)
	if g.leadingKeys != "" {
		s += " if dynamodb:LeadingKeys like " + g.leadingKeys
	}
	return s
}

// Grants every function has: its own log group, X-Ray's write actions (they take no
// resource), its records in the idempotency table under its key prefix, and the table's
// description (the check of its key schema at start, which names no item).
func commonGrants(name, logGroup string) []grant {
	return []grant{
		{sid: "WriteLogs", actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, resource: "!GetAtt " + logGroup + ".Arn"},
		{sid: "WriteTraces", actions: xrayWrite, resource: "*"},
		{sid: "IdempotencyRecords", actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, resource: "!GetAtt IdempotencyTable.Arn",
			leadingKeys: orders.KeyPrefix(name) + "*"},
		{sid: "IdempotencyTableSchema", actions: []string{"dynamodb:DescribeTable"}, resource: "!GetAtt IdempotencyTable.Arn"},
	}
}

// xrayWrite are the actions Lambda's active tracing needs; X-Ray grants them on no
// particular resource ("*"), the one statement of the template on every resource.
var xrayWrite = []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}

var functions = []function{
	{
		resource: "OrdersApiFunction", name: "orders-api", role: "OrdersApiRole", pkg: "examples/orders/cmd/orders-api", env: orders.APIEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvOrdersTable: "!Ref OrdersTable", orders.EnvQueueURL: "!Ref OrdersQueue"},
		grants: append(commonGrants("orders-api", "OrdersApiLogGroup"),
			grant{sid: "CreateOrders", actions: []string{"dynamodb:PutItem"}, resource: "!GetAtt OrdersTable.Arn"},
			grant{sid: "PublishOrderPlaced", actions: []string{"sqs:SendMessage"}, resource: "!GetAtt OrdersQueue.Arn"}),
	},
	{
		resource: "OrdersConsumerFunction", name: "orders-consumer", role: "OrdersConsumerRole", pkg: "examples/orders/cmd/orders-consumer", env: orders.ConsumerEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvLedgerTable: "!Ref LedgerTable"},
		grants: append(commonGrants("orders-consumer", "OrdersConsumerLogGroup"),
			grant{sid: "ReceiveOrderPlaced", actions: []string{"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}, resource: "!GetAtt OrdersQueue.Arn"},
			grant{sid: "AppendLedger", actions: []string{"dynamodb:PutItem"}, resource: "!GetAtt LedgerTable.Arn"}),
	},
	{
		resource: "OrdersStreamFunction", name: "orders-stream", role: "OrdersStreamRole", pkg: "examples/orders/cmd/orders-stream", env: orders.StreamEnv,
		envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable", orders.EnvAuditTable: "!Ref AuditTable"},
		grants: append(commonGrants("orders-stream", "OrdersStreamLogGroup"),
			grant{sid: "ReadOrdersStream", actions: []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
				resource: "!GetAtt OrdersTable.StreamArn"},
			grant{sid: "ReportFailedBatches", actions: []string{"sqs:SendMessage"}, resource: "!GetAtt OrdersStreamFailureQueue.Arn"},
			grant{sid: "AppendAudit", actions: []string{"dynamodb:PutItem"}, resource: "!GetAtt AuditTable.Arn"}),
	},
}

// sweeper is the optional scheduled sweeper of the idempotency table (with the
// SweepSchedule parameter only): a function of the template, not of the example
// service's three, which it serves.
var sweeper = function{
	resource: "IdempotencySweepFunction", name: "idem-sweep", role: "IdempotencySweepRole", pkg: "examples/orders/cmd/idem-sweep", env: orders.SweepEnv,
	envRefs: map[string]string{orders.EnvIdemTable: "!Ref IdempotencyTable"},
	grants: []grant{
		{sid: "WriteLogs", actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, resource: "!GetAtt IdempotencySweepLogGroup.Arn"},
		{sid: "WriteTraces", actions: xrayWrite, resource: "*"},
		{sid: "IdempotencyTableSchema", actions: []string{"dynamodb:DescribeTable"}, resource: "!GetAtt IdempotencyTable.Arn"},
		{sid: "SweepExpiredRecords", actions: []string{"dynamodb:DeleteItem", "dynamodb:Scan"}, resource: "!GetAtt IdempotencyTable.Arn"},
	},
	sweeps: true,
}

// deployed are every function the template may deploy.
var deployed = append(slices.Clone(functions), sweeper)

// roleGrants returns the statements of a role of the template, sorted by Sid.
func roleGrants(t *testing.T, tpl node, role string) []grant {
	t.Helper()
	r := tpl.get(t, "Resources."+role)
	if got := r.get(t, "Type").str(t); got != "AWS::IAM::Role" {
		t.Fatalf("%s is a %s, want an AWS::IAM::Role", role, got)
	}
	var out []grant
	for _, pol := range r.get(t, "Properties.Policies").list(t) {
		for _, st := range pol.get(t, "PolicyDocument.Statement").list(t) {
			if st.get(t, "Effect").str(t) != "Allow" {
				t.Errorf("%s: Effect %s", st.path, st.get(t, "Effect").str(t))
				continue
			}
			g := grant{sid: st.get(t, "Sid").str(t), actions: st.get(t, "Action").strs(t), resource: st.get(t, "Resource").ref()}
			if g.resource == "" {
				g.resource = st.get(t, "Resource").str(t)
			}
			if c, ok := st.lookup("Condition"); ok {
				keys := c.get(t, "ForAllValues:StringLike.dynamodb:LeadingKeys").strs(t)
				if len(keys) != 1 || len(c.keys()) != 1 {
					t.Errorf("%s: Condition is not ForAllValues:StringLike on dynamodb:LeadingKeys with one prefix", st.path)
				}
				g.leadingKeys = strings.Join(keys, ",")
			}
			slices.Sort(g.actions)
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b grant) int { return strings.Compare(a.sid, b.sid) })
	return out
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
	for _, fn := range deployed {
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

			// Its own role: exactly the grants the code and its event sources need.
			if got := p.get(t, "Role").ref(); got != "!GetAtt "+fn.role+".Arn" {
				t.Errorf("Role = %q, want !GetAtt %s.Arn", got, fn.role)
			}
			if _, ok := p.lookup("Policies"); ok {
				t.Errorf("Policies is set: with an explicit Role, SAM ignores it")
			}
			want := slices.Clone(fn.grants)
			slices.SortFunc(want, func(a, b grant) int { return strings.Compare(a.sid, b.sid) })
			if got := roleGrants(t, tpl, fn.role); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s grants\n%s\nwant\n%s", fn.role, lines(got), lines(want))
			}
		})
	}
}

// lines returns one grant a line.
func lines(gs []grant) string {
	var b strings.Builder
	for _, g := range gs {
		b.WriteString("  " + g.String() + "\n")
	}
	return b.String()
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

// TestDeploymentPermissions: docs/deployment.md's table of permissions gives every
// statement of every role of the template, as the template has it, and nothing else.
func TestDeploymentPermissions(t *testing.T) {
	tpl, _ := loadTemplate(t)
	documented := map[string][]grant{}
	for _, cells := range tableCells(t, docSection(t, "docs/deployment.md", "## Permissions"), 5) {
		row := strings.Join(cells, " | ")
		g := grant{sid: strings.Trim(cells[1], "`"), resource: strings.Trim(cells[3], "`")}
		for _, a := range strings.Split(cells[2], ",") {
			g.actions = append(g.actions, strings.Trim(strings.TrimSpace(a), "`"))
		}
		slices.Sort(g.actions)
		if g.resource != "*" {
			g.resource = "!GetAtt " + g.resource
		}
		if cells[4] != "" {
			prefix, found := strings.CutPrefix(cells[4], "`dynamodb:LeadingKeys` like ")
			if !found {
				t.Errorf("row %q: condition %q, want \"`dynamodb:LeadingKeys` like `prefix*`\"", row, cells[4])
			}
			g.leadingKeys = strings.Trim(prefix, "`")
		}
		role := strings.Trim(cells[0], "`")
		documented[role] = append(documented[role], g)
	}
	for _, role := range resourcesOfType(t, tpl, "AWS::IAM::Role") {
		docs := documented[role]
		slices.SortFunc(docs, func(a, b grant) int { return strings.Compare(a.sid, b.sid) })
		if got := roleGrants(t, tpl, role); fmt.Sprint(got) != fmt.Sprint(docs) {
			t.Errorf("%s: the template grants\n%sdocs/deployment.md says\n%s", role, lines(got), lines(docs))
		}
		delete(documented, role)
	}
	for role := range documented {
		t.Errorf("docs/deployment.md's permissions name %s, which the template does not have", role)
	}
}
