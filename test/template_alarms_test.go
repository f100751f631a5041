package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/orders"
)

// alarm is what the tests read of a CloudWatch alarm of the template.
type alarm struct {
	name, namespace, metric, statistic, comparison, missing string
	threshold                                               float64
	dims                                                    map[string]string // name → value (a !Ref or !GetAtt as "!Ref X")
	notifies                                                bool
}

// alarms returns the template's alarms.
func alarms(t *testing.T, tpl node) []alarm {
	t.Helper()
	res := tpl.get(t, "Resources")
	var out []alarm
	for _, name := range resourcesOfType(t, tpl, "AWS::CloudWatch::Alarm") {
		p := res.get(t, name+".Properties")
		a := alarm{name: name, dims: map[string]string{}}
		for field, dst := range map[string]*string{"Namespace": &a.namespace, "MetricName": &a.metric, "Statistic": &a.statistic,
			"ComparisonOperator": &a.comparison, "TreatMissingData": &a.missing} {
			*dst = p.get(t, field).str(t)
		}
		th, err := strconv.ParseFloat(p.get(t, "Threshold").str(t), 64)
		if err != nil {
			t.Fatalf("%s: Threshold: %v", name, err)
		}
		a.threshold = th
		for _, d := range p.get(t, "Dimensions").list(t) {
			v := d.get(t, "Value")
			if r := v.ref(); r != "" {
				a.dims[d.get(t, "Name").str(t)] = r
			} else {
				a.dims[d.get(t, "Name").str(t)] = v.str(t)
			}
		}
		a.notifies = notifiesTopic(p, "AlarmActions") && notifiesTopic(p, "OKActions")
		out = append(out, a)
	}
	return out
}

// notifiesTopic reports whether the alarm's actions field is !If [HasAlarmTopic,
// [!Ref AlarmTopicArn], !Ref AWS::NoValue].
func notifiesTopic(p node, field string) bool {
	v, ok := p.lookup(field)
	if !ok || v.n.Tag != "!If" || len(v.n.Content) != 3 {
		return false
	}
	c := v.n.Content
	return c[0].Value == "HasAlarmTopic" && len(c[1].Content) == 1 && c[1].Content[0].Tag == "!Ref" &&
		c[1].Content[0].Value == "AlarmTopicArn" && c[2].Tag == "!Ref" && c[2].Value == "AWS::NoValue"
}

// find returns the alarms on metric in namespace whose dimensions are dims.
func find(as []alarm, namespace, metric string, dims map[string]string) []alarm {
	var out []alarm
	for _, a := range as {
		if a.namespace == namespace && a.metric == metric && maps.Equal(a.dims, dims) {
			out = append(out, a)
		}
	}
	return out
}

// wantOne checks that exactly one alarm watches what, and that it fires above threshold
// with the statistic, missing data not breaching.
func wantOne(t *testing.T, what string, found []alarm, statistic string, threshold float64) {
	t.Helper()
	if len(found) != 1 {
		t.Errorf("%s: %d alarms, want 1", what, len(found))
		return
	}
	a := found[0]
	if a.statistic != statistic || a.comparison != "GreaterThanThreshold" || a.threshold != threshold || a.missing != "notBreaching" {
		t.Errorf("%s: alarm %s is %s %s %v (missing data %s), want %s GreaterThanThreshold %v, notBreaching",
			what, a.name, a.statistic, a.comparison, a.threshold, a.missing, statistic, threshold)
	}
}

// failureQueues returns the queues a failure ends in: every dead-letter queue of a
// queue's redrive policy and every event source's failure destination.
func failureQueues(t *testing.T, tpl node) []string {
	t.Helper()
	res := tpl.get(t, "Resources")
	var refs []string
	for _, q := range resourcesOfType(t, tpl, "AWS::SQS::Queue") {
		if rp, ok := res.get(t, q+".Properties").lookup("RedrivePolicy"); ok {
			refs = append(refs, rp.get(t, "deadLetterTargetArn").ref())
		}
	}
	for _, fn := range functions {
		events := res.get(t, fn.resource+".Properties.Events")
		for _, ev := range events.keys() {
			if dest, ok := events.get(t, ev+".Properties").lookup("DestinationConfig"); ok {
				refs = append(refs, dest.get(t, "OnFailure.Destination").ref())
			}
		}
	}
	var queues []string
	for _, r := range refs {
		q, ok := strings.CutSuffix(strings.TrimPrefix(r, "!GetAtt "), ".Arn")
		if !ok || !strings.HasPrefix(r, "!GetAtt ") || res.get(t, q+".Type").str(t) != "AWS::SQS::Queue" {
			t.Fatalf("failure destination %q is not a !GetAtt of a queue's Arn", r)
		}
		queues = append(queues, q)
	}
	slices.Sort(queues)
	return slices.Compact(queues)
}

// TestTemplateAlarms: an alarm on the first message in every dead-letter queue and
// failure destination; on every function's Errors and Throttles; on the IteratorAge of
// every stream consumer; on the age of the oldest message of every queue a function
// consumes; on the idempotency table's throttled reads and writes; every alarm
// notifies AlarmTopicArn when it is set.
func TestTemplateAlarms(t *testing.T) {
	tpl, _ := loadTemplate(t)
	as := alarms(t, tpl)
	queues := failureQueues(t, tpl)
	if len(queues) < 2 {
		t.Errorf("failure queues %v: want the orders DLQ and the stream's failure destination", queues)
	}
	for _, q := range queues {
		wantOne(t, "depth of "+q, find(as, "AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": "!GetAtt " + q + ".QueueName"}), "Maximum", 0)
	}
	res := tpl.get(t, "Resources")
	streams := 0
	for _, fn := range functions {
		dims := map[string]string{"FunctionName": "!Ref " + fn.resource}
		for _, metric := range []string{"Errors", "Throttles"} {
			wantOne(t, metric+" of "+fn.resource, find(as, "AWS/Lambda", metric, dims), "Sum", 0)
		}
		events := res.get(t, fn.resource+".Properties.Events")
		for _, ev := range events.keys() {
			if typ := events.get(t, ev+".Type").str(t); typ == "DynamoDB" || typ == "Kinesis" {
				streams++
				found := find(as, "AWS/Lambda", "IteratorAge", dims)
				wantOne(t, "IteratorAge of "+fn.resource, found, "Maximum", 300000)
			}
		}
	}
	if streams == 0 {
		t.Error("no stream event source: the IteratorAge alarm is not checked")
	}
	// The queues the functions consume: the age of the oldest message, above what a
	// message only being retried reaches (maxReceiveCount receives, a visibility timeout
	// apart) before the dead-letter queue takes it.
	consumed := 0
	for _, fn := range functions {
		events := res.get(t, fn.resource+".Properties.Events")
		for _, ev := range events.keys() {
			if events.get(t, ev+".Type").str(t) != "SQS" {
				continue
			}
			consumed++
			q, _ := strings.CutSuffix(strings.TrimPrefix(events.get(t, ev+".Properties.Queue").ref(), "!GetAtt "), ".Arn")
			qp := res.get(t, q+".Properties")
			retrying := atoi(t, qp.get(t, "RedrivePolicy.maxReceiveCount")) * atoi(t, qp.get(t, "VisibilityTimeout"))
			found := find(as, "AWS/SQS", "ApproximateAgeOfOldestMessage", map[string]string{"QueueName": "!GetAtt " + q + ".QueueName"})
			if len(found) != 1 {
				t.Errorf("age of the oldest message of %s: %d alarms, want 1", q, len(found))
				continue
			}
			if a := found[0]; a.statistic != "Maximum" || a.comparison != "GreaterThanThreshold" || a.threshold <= float64(retrying) || a.missing != "notBreaching" {
				t.Errorf("%s is %s %s %v (missing data %s), want Maximum GreaterThanThreshold above %d s (%s's retries), notBreaching",
					a.name, a.statistic, a.comparison, a.threshold, a.missing, retrying, q)
			}
		}
	}
	if consumed == 0 {
		t.Error("no SQS event source: the alarm on the age of the oldest message is not checked")
	}
	// The idempotency table's throttling, reads and writes.
	for _, metric := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
		wantOne(t, metric+" of IdempotencyTable", find(as, "AWS/DynamoDB", metric, map[string]string{"TableName": "!Ref IdempotencyTable"}), "Sum", 0)
	}
	for _, a := range as {
		if !a.notifies {
			t.Errorf("%s: AlarmActions and OKActions are not !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]", a.name)
		}
	}
}

// emfMetric is a metric an EMF document defines, with its value in that document.
type emfMetric struct {
	namespace, name string
	dims            []string
	value           float64
}

// published returns the metrics of the EMF document the functions' observer
// (orders.NewMetrics) writes for a call with verdict v.
func published(t *testing.T, v idem.Verdict) []emfMetric {
	t.Helper()
	var buf bytes.Buffer
	m, err := orders.NewMetrics(&buf, "fn")
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(t.Context(), idem.Observation{Verdict: v, KeyHash: "0123456789abcdef"})
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("EMF document %s: %v", buf.Bytes(), err)
	}
	var meta struct {
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name string }
		}
	}
	raw, _ := json.Marshal(doc["_aws"])
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var out []emfMetric
	for _, d := range meta.CloudWatchMetrics {
		for _, dims := range d.Dimensions {
			for _, met := range d.Metrics {
				value, _ := doc[met.Name].(float64)
				for _, dim := range dims {
					if doc[dim] == nil {
						t.Fatalf("EMF document has no value for dimension %s: %s", dim, buf.Bytes())
					}
				}
				out = append(out, emfMetric{namespace: d.Namespace, name: met.Name, dims: dims, value: value})
			}
		}
	}
	return out
}

// TestTemplateVerdictAlarms: each function has an alarm on idem's retries_exhausted,
// outcome_not_recorded and store_failed verdicts, on a metric that the functions' EMF observer publishes
// for that verdict (namespace, metric, dimension names) and that counts the call, with
// the function's name and the verdict as the dimensions' values.
func TestTemplateVerdictAlarms(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	tpl, _ := loadTemplate(t)
	as := alarms(t, tpl)
	for _, v := range []idem.Verdict{idem.RetriesExhausted, idem.OutcomeNotRecorded, idem.StoreFailed} {
		counting := map[string]emfMetric{} // by namespace/name/dims: the metrics that count this call
		for _, m := range published(t, v) {
			if m.value >= 1 {
				counting[fmt.Sprintf("%s/%s/%s", m.namespace, m.name, strings.Join(slices.Sorted(slices.Values(m.dims)), ","))] = m
			}
		}
		for _, fn := range functions {
			var mine []alarm
			for _, a := range as {
				if a.dims["Verdict"] == v.String() && a.dims[orders.MetricDimension] == "!Ref "+fn.resource {
					mine = append(mine, a)
				}
			}
			if len(mine) != 1 {
				t.Errorf("%s, verdict %s: %d alarms, want 1", fn.resource, v, len(mine))
				continue
			}
			a := mine[0]
			key := fmt.Sprintf("%s/%s/%s", a.namespace, a.metric, strings.Join(slices.Sorted(maps.Keys(a.dims)), ","))
			if _, ok := counting[key]; !ok {
				t.Errorf("%s watches %s, which the functions do not publish for a %s call; they publish %v", a.name, key, v, slices.Sorted(maps.Keys(counting)))
			}
			wantOne(t, fmt.Sprintf("%s of %s", v, fn.resource), mine, "Sum", 0)
		}
	}
}
