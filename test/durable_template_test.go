package test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemgo/idem/internal/devserver"
)

// loadDurableTemplate parses examples/durable/template.yaml, keeping the
// intrinsic functions' tags.
func loadDurableTemplate(t *testing.T) (node, string) {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "durable", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		t.Fatalf("examples/durable/template.yaml: not one YAML document (%v)", err)
	}
	return node{n: doc.Content[0], path: "durable template"}, root
}

// TestDurableTemplatePermissions: the dispatcher may invoke the durable
// function's alias (a qualified ARN) and nothing else, and is told that
// same ARN.
func TestDurableTemplatePermissions(t *testing.T) {
	tpl, root := loadDurableTemplate(t)
	const alias = "!Ref FulfilFunction.Alias"
	fn := tpl.get(t, "Resources.FulfilFunction")
	if got := fn.get(t, "Type").str(t); got != "AWS::Serverless::Function" {
		t.Fatalf("FulfilFunction is a %s", got)
	}
	if got := fn.get(t, "Properties.AutoPublishAlias").str(t); got != "live" {
		t.Errorf("FulfilFunction's alias = %q, want live (what the dispatcher invokes)", got)
	}
	for _, k := range []string{"ExecutionTimeout", "RetentionPeriodInDays"} {
		fn.get(t, "Properties.DurableConfig."+k) // fails when absent
	}

	d := tpl.get(t, "Resources.DispatcherFunction.Properties")
	if got := d.get(t, "Environment.Variables.DURABLE_FUNCTION_ARN").ref(); got != alias {
		t.Errorf("DURABLE_FUNCTION_ARN = %q, want %s", got, alias)
	}
	policies := d.get(t, "Policies").list(t)
	if len(policies) != 1 || policies[0].n.Kind != yaml.MappingNode {
		t.Fatalf("dispatcher policies: %d, want one policy document (no managed or template policies)", len(policies))
	}
	stmts := policies[0].get(t, "Statement").list(t)
	if len(stmts) != 1 {
		t.Fatalf("dispatcher statements: %d, want 1", len(stmts))
	}
	s := stmts[0]
	if s.get(t, "Effect").str(t) != "Allow" || !slices.Equal(s.get(t, "Action").strs(t), []string{"lambda:InvokeFunction"}) {
		t.Errorf("dispatcher statement: %s %v, want Allow [lambda:InvokeFunction]", s.get(t, "Effect").str(t), s.get(t, "Action").strs(t))
	}
	if got := s.get(t, "Resource").ref(); got != alias {
		t.Errorf("dispatcher may invoke %q, want only %s (the qualified ARN)", got, alias)
	}

	src, err := os.ReadFile(filepath.Join(root, "examples", "durable", "dispatcher", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `os.Getenv("DURABLE_FUNCTION_ARN")`) {
		t.Error("the dispatcher does not read DURABLE_FUNCTION_ARN")
	}
}

// TestDurableTemplateWiring: the queue feeds the dispatcher, which reports
// batch item failures; the queue redrives to its dead-letter queue; the
// dispatcher is the Go package that uses lambda/durable.
func TestDurableTemplateWiring(t *testing.T) {
	tpl, root := loadDurableTemplate(t)
	d := tpl.get(t, "Resources.DispatcherFunction.Properties")
	events := d.get(t, "Events")
	if len(events.keys()) != 1 {
		t.Fatalf("dispatcher events %v, want one", events.keys())
	}
	ev := events.get(t, events.keys()[0])
	if ev.get(t, "Type").str(t) != "SQS" || ev.get(t, "Properties.Queue").ref() != "!GetAtt OrdersQueue.Arn" {
		t.Errorf("dispatcher event: %s from %s, want SQS from !GetAtt OrdersQueue.Arn", ev.get(t, "Type").str(t), ev.get(t, "Properties.Queue").ref())
	}
	if !slices.Contains(ev.get(t, "Properties.FunctionResponseTypes").strs(t), "ReportBatchItemFailures") {
		t.Error("the dispatcher's SQS event does not report batch item failures: a failed start would delete its order")
	}
	q := tpl.get(t, "Resources.OrdersQueue.Properties")
	if got := q.get(t, "RedrivePolicy.deadLetterTargetArn").ref(); got != "!GetAtt OrdersDeadLetterQueue.Arn" {
		t.Errorf("OrdersQueue redrives to %q, want its dead-letter queue", got)
	}
	if n := atoi(t, q.get(t, "RedrivePolicy.maxReceiveCount")); n < 2 {
		t.Errorf("maxReceiveCount %d: a throttled start gets no second delivery", n)
	}
	if vt, to := atoi(t, q.get(t, "VisibilityTimeout")), atoi(t, d.get(t, "Timeout")); vt < 6*to {
		t.Errorf("VisibilityTimeout %d, want at least 6 x the dispatcher's Timeout %d", vt, to)
	}
	pkg, err := build.ImportDir(filepath.Join(root, "examples", "durable", d.get(t, "CodeUri").str(t)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "main" || !slices.Contains(pkg.Imports, "github.com/idemgo/idem/lambda/durable") {
		t.Errorf("CodeUri %s: package %s importing %v, want a main package that uses lambda/durable", d.get(t, "CodeUri").str(t), pkg.Name, pkg.Imports)
	}
}
