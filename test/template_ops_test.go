package test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// buildFlags is the GOFLAGS value that the template's header, docs/deployment.md
// and the Makefile's sam-check build with. The single quotes keep "-ldflags=-s -w"
// one flag: unquoted, the go command splits GOFLAGS at spaces and ignores the
// "-w" (a flag of go env, not of go build).
const buildFlags = `-tags=lambda.norpc -trimpath '-ldflags=-s -w'`

// wantBuildSettings is what buildFlags, CGO_ENABLED=0 and sam build's GOOS and
// GOARCH leave in a bootstrap's build information. The go command does not record
// -ldflags when -trimpath is set (they may hold paths): the bootstraps' test
// checks the stripping in the ELF sections instead.
var wantBuildSettings = map[string]string{
	"-tags":       "lambda.norpc",
	"-trimpath":   "true",
	"CGO_ENABLED": "0",
	"GOOS":        "linux",
	"GOARCH":      "arm64",
}

// buildCommand is the sam build command line that the documentation gives.
const buildCommand = `CGO_ENABLED=0 GOFLAGS="` + buildFlags + `" sam build`

// sub returns the string of a !Sub, or "".
func (x node) sub() string {
	if x.n == nil || x.n.Kind != yaml.ScalarNode || x.n.Tag != "!Sub" {
		return ""
	}
	return x.n.Value
}

// resourcesOfType returns the names of the template's resources of type typ.
func resourcesOfType(t *testing.T, tpl node, typ string) []string {
	t.Helper()
	res := tpl.get(t, "Resources")
	var out []string
	for _, name := range res.keys() {
		if res.get(t, name+".Type").str(t) == typ {
			out = append(out, name)
		}
	}
	return out
}

func atoi(t *testing.T, x node) int {
	t.Helper()
	n, err := strconv.Atoi(x.str(t))
	if err != nil {
		t.Fatalf("template: %s: %v", x.path, err)
	}
	return n
}

func TestTemplateFunctionsListed(t *testing.T) {
	tpl, _ := loadTemplate(t)
	var want []string
	for _, fn := range deployed {
		want = append(want, fn.resource)
	}
	got := resourcesOfType(t, tpl, "AWS::Serverless::Function")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("template functions = %v, checked here: %v", got, want)
	}
}

// TestTemplateStatefulResources: the data outlives the stack (Retain on delete and
// on replacement); without fixed names, a retained table or queue never blocks a
// new stack of the same name.
func TestTemplateStatefulResources(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")
	tests := []struct {
		typ, nameProp string
	}{
		{"AWS::DynamoDB::Table", "TableName"},
		{"AWS::SQS::Queue", "QueueName"},
	}
	for _, tc := range tests {
		names := resourcesOfType(t, tpl, tc.typ)
		if len(names) == 0 {
			t.Errorf("no %s in the template", tc.typ)
		}
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				r := res.get(t, name)
				for _, policy := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
					if v, ok := r.lookup(policy); !ok || v.str(t) != "Retain" {
						t.Errorf("%s is not Retain", policy)
					}
				}
				if _, ok := r.get(t, "Properties").lookup(tc.nameProp); ok {
					t.Errorf("%s is set: a retained resource would block the next stack", tc.nameProp)
				}
			})
		}
	}
}

func TestTemplateTablesRecoverable(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")
	for _, name := range resourcesOfType(t, tpl, "AWS::DynamoDB::Table") {
		t.Run(name, func(t *testing.T) {
			p := res.get(t, name+".Properties")
			if got := p.get(t, "PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled").str(t); got != "true" {
				t.Errorf("PointInTimeRecoveryEnabled = %q", got)
			}
		})
	}
}

// TestTemplateQueueRetention: every queue sets its retention; a message keeps its
// first enqueue time in the dead-letter queue, so the DLQ keeps messages longer
// (14 days, the maximum).
func TestTemplateQueueRetention(t *testing.T) {
	tpl, _ := loadTemplate(t)
	res := tpl.get(t, "Resources")
	for _, name := range resourcesOfType(t, tpl, "AWS::SQS::Queue") {
		if n := atoi(t, res.get(t, name+".Properties.MessageRetentionPeriod")); n < 60 || n > 1209600 {
			t.Errorf("%s: MessageRetentionPeriod %d is outside SQS's 60..1209600", name, n)
		}
	}
	dlq := deadLetterQueue(t, tpl)
	queue := atoi(t, res.get(t, "OrdersQueue.Properties.MessageRetentionPeriod"))
	if got := atoi(t, res.get(t, dlq+".Properties.MessageRetentionPeriod")); got != 1209600 || got <= queue {
		t.Errorf("%s keeps messages %d s, want 1209600 (14 days), more than OrdersQueue's %d", dlq, got, queue)
	}
}

// deadLetterQueue returns the resource name of OrdersQueue's dead-letter queue.
func deadLetterQueue(t *testing.T, tpl node) string {
	t.Helper()
	target := tpl.get(t, "Resources.OrdersQueue.Properties.RedrivePolicy.deadLetterTargetArn").ref()
	name, ok := strings.CutSuffix(strings.TrimPrefix(target, "!GetAtt "), ".Arn")
	if !ok || !strings.HasPrefix(target, "!GetAtt ") {
		t.Fatalf("deadLetterTargetArn = %q, want a !GetAtt of a queue's Arn", target)
	}
	return name
}

// TestTemplateLogging: tracing on, JSON logs, and each function's own log group
// named as Lambda would name it, with a retention.
func TestTemplateLogging(t *testing.T) {
	tpl, _ := loadTemplate(t)
	g := tpl.get(t, "Globals.Function")
	if got := g.get(t, "Tracing").str(t); got != "Active" {
		t.Errorf("Globals.Function.Tracing = %q want Active", got)
	}
	if got := g.get(t, "LoggingConfig.LogFormat").str(t); got != "JSON" {
		t.Errorf("Globals.Function.LoggingConfig.LogFormat = %q want JSON", got)
	}
	res := tpl.get(t, "Resources")
	for _, fn := range deployed {
		t.Run(fn.resource, func(t *testing.T) {
			p := res.get(t, fn.resource+".Properties")
			fname := p.get(t, "FunctionName").sub()
			if !strings.HasPrefix(fname, "${AWS::StackName}-") {
				t.Errorf("FunctionName = %q, want a !Sub of ${AWS::StackName}-<name>", fname)
			}
			group, ok := strings.CutPrefix(p.get(t, "LoggingConfig.LogGroup").ref(), "!Ref ")
			if !ok {
				t.Fatalf("LoggingConfig.LogGroup is not a !Ref of a log group")
			}
			lg := res.get(t, group)
			if got := lg.get(t, "Type").str(t); got != "AWS::Logs::LogGroup" {
				t.Fatalf("%s is a %s", group, got)
			}
			if got := lg.get(t, "Properties.LogGroupName").sub(); got != "/aws/lambda/"+fname {
				t.Errorf("%s LogGroupName = %q want /aws/lambda/%s", group, got, fname)
			}
			if days := atoi(t, lg.get(t, "Properties.RetentionInDays")); days < 1 || days > 3653 {
				t.Errorf("%s RetentionInDays = %d", group, days)
			}
		})
	}
}

// TestTemplateNoHardCodedDomain: URLs take the partition's domain from
// ${AWS::URLSuffix}, so that the template deploys in every partition (service
// principals, such as lambda.amazonaws.com, are names, not domains).
func TestTemplateNoHardCodedDomain(t *testing.T) {
	tpl, _ := loadTemplate(t)
	var walk func(x node)
	walk = func(x node) {
		// A service principal (lambda.amazonaws.com) is a name, the same in every
		// partition, not a domain.
		if x.n.Kind == yaml.ScalarNode && strings.Contains(x.n.Value, "amazonaws.com") && !strings.Contains(x.path, ".Principal.Service") {
			t.Errorf("%s = %q: use ${AWS::URLSuffix}", x.path, x.n.Value)
		}
		for i, c := range x.n.Content {
			p := x.path + "[" + strconv.Itoa(i) + "]"
			if x.n.Kind == yaml.MappingNode {
				p = x.path + "." + x.n.Content[i-i%2].Value
			}
			walk(node{n: c, path: p})
		}
	}
	walk(tpl.get(t, "Resources"))
	walk(tpl.get(t, "Outputs"))
	if got := tpl.get(t, "Outputs.OrdersEndpoint.Value").sub(); !strings.Contains(got, ".${AWS::URLSuffix}/") {
		t.Errorf("OrdersEndpoint = %q, want the domain from ${AWS::URLSuffix}", got)
	}
}

// TestBuildCommandDocumented: the template's header, docs/deployment.md and the
// Makefile's sam-check build with the same flags (the bootstraps' test checks
// what those flags produce).
func TestBuildCommandDocumented(t *testing.T) {
	tpl, root := loadTemplate(t)
	if got := tpl.get(t, "Description").str(t); !strings.Contains(got, buildCommand) {
		t.Errorf("template.yaml's Description does not give %s", buildCommand)
	}
	tests := []struct {
		file, want string
	}{
		{"docs/deployment.md", buildCommand},
		{"Makefile", "SAM_GOFLAGS   := " + buildFlags + "\n"},
	}
	for _, tc := range tests {
		b, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Error(err)
		} else if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s does not contain %q", tc.file, tc.want)
		}
	}
}

// resourceTypes are the words docs/deployment.md's table of resources uses for the
// template's resource types.
var resourceTypes = map[string]string{
	"DynamoDB table": "AWS::DynamoDB::Table", "DynamoDB tables": "AWS::DynamoDB::Table",
	"SQS queue": "AWS::SQS::Queue", "SQS queues": "AWS::SQS::Queue",
	"CloudWatch alarm": "AWS::CloudWatch::Alarm", "CloudWatch alarms": "AWS::CloudWatch::Alarm",
	"CloudWatch Logs log group": "AWS::Logs::LogGroup", "CloudWatch Logs log groups": "AWS::Logs::LogGroup",
	"function": "AWS::Serverless::Function",
	"IAM role": "AWS::IAM::Role", "IAM roles": "AWS::IAM::Role",
	"HTTP API":             "AWS::Serverless::HttpApi",
	"CloudWatch dashboard": "AWS::CloudWatch::Dashboard",
}

// TestDeploymentResourceTable: docs/deployment.md's table of resources names every
// resource of the template once, with its type, and nothing else.
func TestDeploymentResourceTable(t *testing.T) {
	tpl, _ := loadTemplate(t)
	documented := map[string]string{}
	for _, cells := range tableCells(t, docSection(t, "docs/deployment.md", "## The template's resources"), 3) {
		row := strings.Join(cells, " | ")
		typ, ok := resourceTypes[strings.TrimSpace(cells[1])]
		if !ok {
			t.Errorf("row %q: unknown type %q", row, strings.TrimSpace(cells[1]))
		}
		for _, name := range strings.Split(cells[0], ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			if _, dup := documented[name]; dup {
				t.Errorf("%s is in the table twice", name)
			}
			documented[name] = typ
		}
	}
	res := tpl.get(t, "Resources")
	for _, name := range res.keys() {
		typ := res.get(t, name+".Type").str(t)
		switch got, ok := documented[name]; {
		case !ok:
			t.Errorf("the template's %s (%s) is not in docs/deployment.md's table", name, typ)
		case got != typ:
			t.Errorf("docs/deployment.md gives %s the type %s, the template %s", name, got, typ)
		}
		delete(documented, name)
	}
	for name := range documented {
		t.Errorf("docs/deployment.md's table names %s, which the template does not have", name)
	}
}

// TestLambdaDocFunctions: docs/lambda.md's example service says how many functions the
// template deploys, and names each.
func TestLambdaDocFunctions(t *testing.T) {
	tpl, _ := loadTemplate(t)
	section := docSection(t, "docs/lambda.md", "## The example service and its deployment")
	words := []string{"no", "one", "two", "three", "four", "five", "six"}
	if want := "has " + words[len(functions)] + " functions deployed by the template"; !strings.Contains(section, want) {
		t.Errorf("docs/lambda.md does not say %q", want)
	}
	res := tpl.get(t, "Resources")
	for _, fn := range functions {
		name := strings.TrimPrefix(res.get(t, fn.resource+".Properties.FunctionName").sub(), "${AWS::StackName}-")
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/lambda.md's example service does not name %s", name)
		}
	}
}
