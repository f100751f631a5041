package emf_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/emf"
	"github.com/idemgo/idem/memstore"
)

// schema compiles testdata/emf.schema.json, the specification's structure.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/emf.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("emf.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("emf.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkDocument validates one line against the schema and the rules a
// schema cannot state: every referenced dimension is a string member of the
// root, every metric a number.
func checkDocument(t *testing.T, s *jsonschema.Schema, line []byte) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, line)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("document does not follow the specification: %v\n%s", err, line)
	}
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	for _, d := range doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		dir := d.(map[string]any)
		for _, set := range dir["Dimensions"].([]any) {
			for _, name := range set.([]any) {
				if _, ok := doc[name.(string)].(string); !ok {
					t.Errorf("dimension %v is not a string member of the root: %s", name, line)
				}
			}
		}
		for _, m := range dir["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			if _, ok := doc[name].(float64); !ok {
				t.Errorf("metric %s is not a number member of the root: %s", name, line)
			}
		}
	}
	return doc
}

func TestDocumentsFollowTheSpecification(t *testing.T) {
	s := schema(t)
	var out bytes.Buffer
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	e, err := emf.New(&out, emf.WithNamespace("orders"), emf.WithDimension("Service", "orders-api"), emf.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	r, err := idem.New(memstore.New(), idem.WithObserver(e))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := func(context.Context) ([]byte, error) { return []byte(`1`), nil }
	_, _ = r.Do(ctx, "evt:m1:a", []byte(`{}`), ok)
	_, _ = r.Do(ctx, "evt:m1:a", []byte(`{}`), ok)
	_, _ = r.Do(ctx, "evt:m1:a", []byte(`{"n":2}`), ok)
	_, _ = r.Do(ctx, "evt:m2:a", []byte(`{}`), func(context.Context) ([]byte, error) { return nil, core.MarkPermanent(errors.New("declined")) })
	want := []struct {
		verdict string
		metric  string
	}{{"executed", "Executions"}, {"replayed", "Replays"}, {"key_reused", "KeyReused"}, {"failed_permanently", "Executions"}}
	sc := bufio.NewScanner(&out)
	i := 0
	for ; sc.Scan(); i++ {
		doc := checkDocument(t, s, sc.Bytes())
		if i >= len(want) {
			t.Fatalf("more documents than calls: %s", sc.Bytes())
		}
		if doc["Verdict"] != want[i].verdict || doc[want[i].metric] != 1.0 || doc["Calls"] != 1.0 || doc["Service"] != "orders-api" {
			t.Errorf("document %d = %s, want verdict %s with %s 1", i, sc.Bytes(), want[i].verdict, want[i].metric)
		}
		if ts := doc["_aws"].(map[string]any)["Timestamp"]; ts != float64(t0.UnixMilli()) {
			t.Errorf("Timestamp = %v, want %d", ts, t0.UnixMilli())
		}
		if strings.Contains(sc.Text(), "evt:m") {
			t.Errorf("document carries the raw key: %s", sc.Bytes())
		}
	}
	if i != len(want) {
		t.Fatalf("%d documents, want %d", i, len(want))
	}
}

func TestSchemaRejectsBrokenDocuments(t *testing.T) {
	s := schema(t)
	for name, doc := range map[string]string{
		"no _aws":              `{"Calls":1}`,
		"timestamp in seconds": `{"_aws":{"Timestamp":1.5,"CloudWatchMetrics":[]}}`,
		"no dimension set":     `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[]}]}}`,
		"bad unit":             `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[]],"Metrics":[{"Name":"x","Unit":"Parsecs"}]}]}}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: the schema accepted %s", name, doc)
		}
	}
}

func TestBadOptions(t *testing.T) {
	for name, o := range map[string]emf.Option{
		"empty namespace":     emf.WithNamespace(""),
		"reserved dimension":  emf.WithDimension("Verdict", "x"),
		"metric as dimension": emf.WithDimension("Calls", "x"),
		"nil clock":           emf.WithClock(nil),
	} {
		if _, err := emf.New(&bytes.Buffer{}, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := emf.New(nil); err == nil {
		t.Error("nil writer accepted")
	}
}

// Every verdict, those the wrappers report without a call included, makes
// a document that follows the specification, with the verdict as its
// dimension and Calls 1.
func TestEveryVerdictIsADocument(t *testing.T) {
	s := schema(t)
	var out bytes.Buffer
	e, err := emf.New(&out)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range idem.Verdicts() {
		out.Reset()
		e.Observe(context.Background(), idem.Observation{Verdict: v, KeyHash: "0123456789abcdef"})
		doc := checkDocument(t, s, bytes.TrimSpace(out.Bytes()))
		if doc["Verdict"] != v.String() || doc["Calls"] != 1.0 || doc["Executions"] != map[bool]float64{true: 1, false: 0}[v.Ran()] {
			t.Errorf("%s: document %s", v, out.Bytes())
		}
	}
}
