package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
)

// The template as CloudFormation deploys it: SAM's transform, run offline by the SAM
// translator (testdata/sam_translate.py, with the samtranslator package of the SAM CLI
// that make deps installs in .cache/sam-venv). These tests hold what SAM generates
// (roles, event source mappings, the HTTP API's stage) to the production review's list;
// template_test.go and the others check the template as written.

// samPython is the Python that has the SAM translator: IDEM_SAM_PYTHON, or the SAM
// CLI's virtualenv that make deps installs.
func samPython(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("IDEM_SAM_PYTHON"); p != "" {
		return p
	}
	p := filepath.Join(root, ".cache", "sam-venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
			t.Skip("IDEM_SKIP_INTEGRATION=1 and no SAM translator")
		}
		t.Fatalf("no SAM translator at %s: run make deps (it installs the SAM CLI there), or set IDEM_SAM_PYTHON to a Python with samtranslator", p)
	}
	return p
}

var (
	translateOnce sync.Once
	translatedTpl map[string]any
	translateErr  error
)

// translated returns the CloudFormation template SAM makes of template.yaml.
func translated(t *testing.T) map[string]any {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := samPython(t, root)
	translateOnce.Do(func() {
		cmd := exec.CommandContext(t.Context(), python, filepath.Join(root, "test", "testdata", "sam_translate.py"), filepath.Join(root, "template.yaml"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			translateErr = fmt.Errorf("SAM translator: %v\n%s", err, stderr.Bytes())
			return
		}
		translateErr = json.Unmarshal(out, &translatedTpl)
	})
	if translateErr != nil {
		t.Fatal(translateErr)
	}
	return translatedTpl
}

// cfn is a view of the translated template's JSON.
type cfn map[string]any

func (c cfn) resources() map[string]cfn {
	out := map[string]cfn{}
	for name, r := range c["Resources"].(map[string]any) {
		out[name] = r.(map[string]any)
	}
	return out
}

func (c cfn) typ() string { s, _ := c["Type"].(string); return s }

func (c cfn) props() cfn { p, _ := c["Properties"].(map[string]any); return p }

// at returns the value at a dotted path, or nil.
func (c cfn) at(path string) any {
	var cur any = map[string]any(c)
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// target returns the resource a {"Ref": X} or {"Fn::GetAtt": [X, attr]} names, with
// the attribute ("" for a Ref); ok is false for anything else.
func target(v any) (name, attr string, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != 1 {
		return "", "", false
	}
	if r, isRef := m["Ref"].(string); isRef {
		return r, "", true
	}
	if ga, isGetAtt := m["Fn::GetAtt"].([]any); isGetAtt && len(ga) == 2 {
		n, _ := ga[0].(string)
		a, _ := ga[1].(string)
		return n, a, n != ""
	}
	return "", "", false
}

// strList returns a string or a list of strings as a list.
func strList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// own returns the resources the function named by its resource is the one user of, or
// a user of by its configuration: what its environment names, its log group, the
// sources and failure destinations of its event source mappings.
func own(t *testing.T, res map[string]cfn, fn string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	p := res[fn].props()
	for _, v := range p.at("Environment.Variables").(map[string]any) {
		if name, _, ok := target(v); ok {
			out[name] = true
		}
	}
	if name, _, ok := target(p.at("LoggingConfig.LogGroup")); ok {
		out[name] = true
	}
	for _, esm := range mappings(res, fn) {
		for _, path := range []string{"EventSourceArn", "DestinationConfig.OnFailure.Destination"} {
			if name, _, ok := target(esm.props().at(path)); ok {
				out[name] = true
			}
		}
	}
	return out
}

// mappings returns the event source mappings that invoke the function fn.
func mappings(res map[string]cfn, fn string) []cfn {
	var out []cfn
	for _, name := range slices.Sorted(maps.Keys(res)) {
		r := res[name]
		if f, _, _ := target(r.props()["FunctionName"]); r.typ() == "AWS::Lambda::EventSourceMapping" && f == fn {
			out = append(out, r)
		}
	}
	return out
}

// readActions are what Lambda needs to read each kind of event source, from the
// Lambda and DynamoDB developer guides (the execution role's permissions for Amazon
// SQS; "IAM policy to allow an AWS Lambda function to access DynamoDB stream records").
var readActions = map[string][]string{
	"AWS::SQS::Queue":      {"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"},
	"AWS::DynamoDB::Table": {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
}

// statement is an Allow statement of a translated role's inline policy.
type statement struct {
	actions   []string
	resource  any
	condition any
}

// statements returns the Allow statements of the role's inline policies; a Deny or a
// statement of another shape fails the test.
func statements(t *testing.T, role cfn, name string) []statement {
	t.Helper()
	var out []statement
	pols, _ := role.props()["Policies"].([]any)
	for _, pol := range pols {
		sts, _ := cfn(pol.(map[string]any)).at("PolicyDocument.Statement").([]any)
		for _, s := range sts {
			st := cfn(s.(map[string]any))
			if st["Effect"] != "Allow" || st["NotAction"] != nil || st["NotResource"] != nil {
				t.Errorf("%s: a statement other than Allow Action Resource: %v", name, st)
				continue
			}
			acts := strList(st["Action"])
			slices.Sort(acts)
			out = append(out, statement{actions: acts, resource: st["Resource"], condition: st["Condition"]})
		}
	}
	return out
}

// TestTranslatedLeastPrivilege: as SAM translates the template, every function runs
// under a role of its own with inline statements only (no managed policy: those SAM
// attaches, AWSLambdaBasicExecutionRole, AWSXrayWriteOnlyAccess,
// AWSLambdaSQSQueueExecutionRole and AWSLambdaDynamoDBExecutionRole, grant on every
// resource); every statement names one resource of the function's own (its tables,
// queue, stream, failure destination, log group), but X-Ray's write actions, which
// take no resource ("*"), the one exception; no action has a wildcard; the function
// reads its event sources with exactly what Lambda needs and sends to its failure
// destination; a table that several functions share is granted item by item under the
// function's own key prefix (dynamodb:LeadingKeys, orders.KeyPrefix), and its
// DescribeTable in a statement of its own.
func TestTranslatedLeastPrivilege(t *testing.T) {
	res := cfn(translated(t)).resources()
	users := map[string]int{} // table → functions whose environment names it (whose items they use)
	for _, fn := range deployed {
		for _, v := range res[fn.resource].props().at("Environment.Variables").(map[string]any) {
			if table, _, ok := target(v); ok && res[table].typ() == "AWS::DynamoDB::Table" {
				users[table]++
			}
		}
	}
	if !slices.Contains(slices.Collect(maps.Values(users)), len(deployed)) {
		t.Errorf("tables by users %v: no table the functions share; the key prefixes are not checked", users)
	}
	roles := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		r := res[name]
		switch r.typ() {
		case "AWS::IAM::Role":
			if arns := r.props()["ManagedPolicyArns"]; arns != nil {
				t.Errorf("%s has managed policies %v: each grants on every resource", name, arns)
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy":
			t.Errorf("%s is a %s: grants live in the functions' roles", name, r.typ())
		case "AWS::Lambda::Function":
			role, attr, ok := target(r.props()["Role"])
			if !ok || attr != "Arn" || res[role].typ() != "AWS::IAM::Role" {
				t.Errorf("%s: Role %v is not the Arn of a role of the template", name, r.props()["Role"])
				continue
			}
			if other, dup := roles[role]; dup {
				t.Errorf("%s and %s share the role %s", other, name, role)
			}
			roles[role] = name
		}
	}
	if len(roles) != len(deployed) {
		t.Fatalf("roles of %d functions, want %d", len(roles), len(deployed))
	}
	for _, fn := range deployed {
		t.Run(fn.resource, func(t *testing.T) {
			role, _, _ := target(res[fn.resource].props()["Role"])
			checkStatements(t, res, fn, statements(t, res[role], role), users)
		})
	}
}

// checkStatements holds one function's statements to TestTranslatedLeastPrivilege's list.
func checkStatements(t *testing.T, res map[string]cfn, fn function, sts []statement, users map[string]int) {
	t.Helper()
	mine := own(t, res, fn.resource)
	granted := map[string][]string{} // "X.attr" → actions
	for _, st := range sts {
		for _, a := range st.actions {
			if strings.Contains(a, "*") {
				t.Errorf("action %s has a wildcard", a)
			}
		}
		if st.resource == "*" {
			if !slices.Equal(st.actions, xrayWrite) || st.condition != nil {
				t.Errorf("%v on every resource: only X-Ray's write actions %v may be", st.actions, xrayWrite)
			}
			continue
		}
		name, attr, ok := target(st.resource)
		if !ok || attr == "" {
			t.Errorf("%v on %v: want one Fn::GetAtt of a resource of the template", st.actions, st.resource)
			continue
		}
		if !mine[name] {
			t.Errorf("%v on %s, which is not the function's own (%v)", st.actions, name, slices.Sorted(maps.Keys(mine)))
		}
		granted[name+"."+attr] = append(granted[name+"."+attr], st.actions...)
		if users[name] > 1 && attr == "Arn" {
			checkShared(t, fn, name, st)
		}
	}
	for _, esm := range mappings(res, fn.resource) {
		src, attr, _ := target(esm.props()["EventSourceArn"])
		if want := readActions[res[src].typ()]; !slices.Equal(sorted(granted[src+"."+attr]), want) {
			t.Errorf("on its event source %s.%s: %v, want exactly %v", src, attr, sorted(granted[src+"."+attr]), want)
		}
		if dest, attr, ok := target(esm.props().at("DestinationConfig.OnFailure.Destination")); ok {
			if !slices.Contains(granted[dest+"."+attr], "sqs:SendMessage") {
				t.Errorf("no sqs:SendMessage on its failure destination %s", dest)
			}
		}
	}
	if lg, _, _ := target(res[fn.resource].props().at("LoggingConfig.LogGroup")); !slices.Equal(sorted(granted[lg+".Arn"]), []string{"logs:CreateLogStream", "logs:PutLogEvents"}) {
		t.Errorf("on its log group %s: %v, want logs:CreateLogStream and logs:PutLogEvents", lg, granted[lg+".Arn"])
	}
}

// checkShared holds a statement on a table several functions share: DescribeTable alone,
// or item actions under the function's key prefix; for the sweeper, Scan and DeleteItem
// alone, without a condition (a Scan names no key; each DeleteItem carries its own
// condition, the item's being past retention).
func checkShared(t *testing.T, fn function, table string, st statement) {
	t.Helper()
	if fn.sweeps && !slices.Contains(st.actions, "dynamodb:DescribeTable") {
		if !slices.Equal(st.actions, []string{"dynamodb:DeleteItem", "dynamodb:Scan"}) || st.condition != nil {
			t.Errorf("the sweeper on the shared %s: %v (condition %v), want DeleteItem and Scan alone", table, st.actions, st.condition)
		}
		return
	}
	if slices.Contains(st.actions, "dynamodb:DescribeTable") {
		if len(st.actions) == 1 && st.condition == nil {
			return
		}
		t.Errorf("on the shared %s: DescribeTable with %v (condition %v), want it in a statement of its own", table, st.actions, st.condition)
	}
	want := map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{orders.KeyPrefix(fn.name) + "*"}}}
	if fmt.Sprint(st.condition) != fmt.Sprint(want) {
		t.Errorf("%v on the shared %s: condition %v, want %v (the function's key prefix, orders.KeyPrefix)", st.actions, table, st.condition, want)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestTranslatedOperations: as SAM translates the template, every table has deletion
// protection; every SQS event source mapping bounds its concurrency
// (ScalingConfig.MaximumConcurrency); every HTTP API stage writes JSON access logs to
// a log group with a retention and throttles its default route; the alarms of the
// review are there (the age of the oldest message of every consumed queue, the
// verdicts store_failed and outcome_not_recorded of every function, the idempotency
// table's throttled reads and writes; template_alarms_test.go checks their
// thresholds); and a dashboard shows verdict counts, the failure queues' depth, the
// oldest message's age, the iterator age and the handlers' duration.
func TestTranslatedOperations(t *testing.T) {
	res := cfn(translated(t)).resources()
	var alarms []string
	var stages, sqsMappings, dashboards int
	for _, name := range slices.Sorted(maps.Keys(res)) {
		r, p := res[name], res[name].props()
		switch r.typ() {
		case "AWS::DynamoDB::Table":
			if p["DeletionProtectionEnabled"] != true {
				t.Errorf("%s: DeletionProtectionEnabled = %v", name, p["DeletionProtectionEnabled"])
			}
		case "AWS::Lambda::EventSourceMapping":
			if src, _, _ := target(p["EventSourceArn"]); res[src].typ() == "AWS::SQS::Queue" {
				sqsMappings++
				if n, _ := p.at("ScalingConfig.MaximumConcurrency").(float64); n < 2 || n > 1000 {
					t.Errorf("%s: ScalingConfig.MaximumConcurrency = %v, want 2 to 1000", name, p.at("ScalingConfig.MaximumConcurrency"))
				}
			}
		case "AWS::ApiGatewayV2::Stage":
			stages++
			checkStage(t, res, name, p)
		case "AWS::CloudWatch::Alarm":
			alarms = append(alarms, alarmKey(p))
		case "AWS::CloudWatch::Dashboard":
			dashboards++
			checkDashboard(t, res, name, p)
		}
	}
	if stages == 0 || sqsMappings == 0 || dashboards != 1 {
		t.Errorf("%d HTTP API stages, %d SQS event source mappings, %d dashboards: want at least one of each, one dashboard", stages, sqsMappings, dashboards)
	}
	var want []string
	for _, fn := range functions {
		for _, esm := range mappings(res, fn.resource) {
			if src, _, _ := target(esm.props()["EventSourceArn"]); res[src].typ() == "AWS::SQS::Queue" {
				want = append(want, "AWS/SQS ApproximateAgeOfOldestMessage QueueName="+src+".QueueName")
			}
		}
		want = append(want,
			"idem Calls FunctionName="+fn.resource+" Verdict=store_failed",
			"idem OutcomesNotRecorded FunctionName="+fn.resource+" Verdict=outcome_not_recorded")
	}
	want = append(want, "AWS/DynamoDB ReadThrottleEvents TableName=IdempotencyTable", "AWS/DynamoDB WriteThrottleEvents TableName=IdempotencyTable")
	for _, w := range want {
		if !slices.Contains(alarms, w) {
			t.Errorf("no alarm on %s", w)
		}
	}
}

// alarmKey is an alarm's namespace, metric and dimensions ("Name=Resource.attr" for a
// reference), as one string.
func alarmKey(p cfn) string {
	key := fmt.Sprintf("%v %v", p["Namespace"], p["MetricName"])
	dims, _ := p["Dimensions"].([]any)
	for _, d := range dims {
		dm := d.(map[string]any)
		v := fmt.Sprint(dm["Value"])
		if name, attr, ok := target(dm["Value"]); ok {
			v = strings.TrimSuffix(name+"."+attr, ".")
		}
		key += fmt.Sprintf(" %v=%s", dm["Name"], v)
	}
	return key
}

// checkStage holds an HTTP API stage to JSON access logs in a log group with a
// retention and a throttle on its default route.
func checkStage(t *testing.T, res map[string]cfn, name string, p cfn) {
	t.Helper()
	lg, attr, ok := target(p.at("AccessLogSettings.DestinationArn"))
	if !ok || attr != "Arn" || res[lg].typ() != "AWS::Logs::LogGroup" || res[lg].props()["RetentionInDays"] == nil {
		t.Errorf("%s: access logs go to %v, want the Arn of a log group with a retention", name, p.at("AccessLogSettings.DestinationArn"))
	}
	var format map[string]any
	if f, _ := p.at("AccessLogSettings.Format").(string); json.Unmarshal([]byte(f), &format) != nil || format["requestId"] != "$context.requestId" || format["status"] != "$context.status" {
		t.Errorf("%s: access log format %v, want a JSON line with the request id and status", name, p.at("AccessLogSettings.Format"))
	}
	rate, _ := p.at("DefaultRouteSettings.ThrottlingRateLimit").(float64)
	burst, _ := p.at("DefaultRouteSettings.ThrottlingBurstLimit").(float64)
	if rate <= 0 || burst < rate {
		t.Errorf("%s: default route throttle rate %v, burst %v; want a rate and a burst at least as large", name, rate, burst)
	}
}

// subRef matches a ${Resource} or ${Resource.Attribute} of a Fn::Sub.
var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9]+)(\.[A-Za-z]+)?\}`)

// checkDashboard holds the dashboard to the metrics the review asks for: idem's calls by
// verdict of every function, the depth of every failure queue, the age of the oldest
// message of every consumed queue, the iterator age of every stream consumer and the
// duration of every function.
func checkDashboard(t *testing.T, res map[string]cfn, name string, p cfn) {
	t.Helper()
	body, _ := p.at("DashboardBody.Fn::Sub").(string)
	for _, m := range subRef.FindAllStringSubmatch(body, -1) {
		if _, ok := res[m[1]]; !ok && !strings.HasPrefix(m[1], "AWS") {
			t.Errorf("%s names %s, not a resource of the template", name, m[0])
		}
	}
	var dash struct {
		Widgets []struct {
			Properties struct {
				Metrics [][]any
			}
		}
	}
	if err := json.Unmarshal([]byte(subRef.ReplaceAllString(body, "$1$2")), &dash); err != nil {
		t.Fatalf("%s: DashboardBody is not JSON: %v", name, err)
	}
	shown := map[string]bool{}
	for _, w := range dash.Widgets {
		for _, m := range w.Properties.Metrics {
			if len(m) > 0 {
				if e, ok := m[0].(map[string]any); ok {
					shown[fmt.Sprint(e["expression"])] = true
					continue
				}
			}
			var parts []string
			for _, x := range m {
				if s, ok := x.(string); ok {
					parts = append(parts, s)
				}
			}
			shown[strings.Join(parts, " ")] = true
		}
	}
	var want []string
	for _, fn := range functions {
		want = append(want, fmt.Sprintf(`SEARCH('{idem,FunctionName,Verdict} MetricName="Calls" FunctionName="%s"', 'Sum', 300)`, fn.resource),
			"AWS/Lambda Duration FunctionName "+fn.resource)
		for _, esm := range mappings(res, fn.resource) {
			src, _, _ := target(esm.props()["EventSourceArn"])
			if res[src].typ() == "AWS::SQS::Queue" {
				want = append(want, "AWS/SQS ApproximateAgeOfOldestMessage QueueName "+src+".QueueName")
			} else {
				want = append(want, "AWS/Lambda IteratorAge FunctionName "+fn.resource)
			}
			if dest, _, ok := target(esm.props().at("DestinationConfig.OnFailure.Destination")); ok {
				want = append(want, "AWS/SQS ApproximateNumberOfMessagesVisible QueueName "+dest+".QueueName")
			}
		}
	}
	want = append(want, "AWS/SQS ApproximateNumberOfMessagesVisible QueueName "+deadLetterQueueOf(t, res)+".QueueName")
	for _, w := range want {
		if !shown[w] {
			t.Errorf("%s does not show %s; it shows %v", name, w, slices.Sorted(maps.Keys(shown)))
		}
	}
}

// deadLetterQueueOf returns the orders queue's dead-letter queue in the translated
// template.
func deadLetterQueueOf(t *testing.T, res map[string]cfn) string {
	t.Helper()
	q, _, ok := target(res["OrdersQueue"].props().at("RedrivePolicy.deadLetterTargetArn"))
	if !ok {
		t.Fatal("OrdersQueue has no dead-letter queue")
	}
	return q
}

// TestTemplateSweeper: the sweeper is deployed only with a SweepSchedule (empty by
// default), on that schedule; as SAM translates the template, every resource of the
// sweeper's, those SAM adds for its schedule included, carries the condition.
func TestTemplateSweeper(t *testing.T) {
	tpl, _ := loadTemplate(t)
	if got := tpl.get(t, "Parameters.SweepSchedule.Default").str(t); got != "" {
		t.Errorf("SweepSchedule's default = %q, want empty: no sweeper unless asked", got)
	}
	cond := tpl.get(t, "Conditions.HasSweepSchedule")
	if cond.n.Tag != "!Not" || len(cond.n.Content) != 1 || cond.n.Content[0].Tag != "!Equals" {
		t.Fatalf("HasSweepSchedule is not !Not [!Equals [...]]")
	}
	if eq := (node{n: cond.n.Content[0]}).list(t); len(eq) != 2 || eq[0].ref() != "!Ref SweepSchedule" || eq[1].str(t) != "" {
		t.Errorf("HasSweepSchedule does not test SweepSchedule against empty")
	}
	res := tpl.get(t, "Resources")
	ev := res.get(t, sweeper.resource+".Properties.Events.Sweep")
	if ev.get(t, "Type").str(t) != "Schedule" || ev.get(t, "Properties.Schedule").ref() != "!Ref SweepSchedule" {
		t.Errorf("the sweeper's event is not a Schedule of !Ref SweepSchedule")
	}
	var conditioned []string
	for name, r := range cfn(translated(t)).resources() {
		if strings.HasPrefix(name, "IdempotencySweep") {
			if r["Condition"] != "HasSweepSchedule" {
				t.Errorf("%s (%s) is deployed without the sweeper's condition", name, r.typ())
			}
			conditioned = append(conditioned, r.typ())
		}
	}
	for _, typ := range []string{"AWS::Lambda::Function", "AWS::Events::Rule", "AWS::Lambda::Permission", "AWS::IAM::Role", "AWS::Logs::LogGroup"} {
		if !slices.Contains(conditioned, typ) {
			t.Errorf("no %s of the sweeper under its condition (have %v)", typ, conditioned)
		}
	}
}
