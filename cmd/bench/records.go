package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/capacity"
)

// idem's record beside Powertools' (TypeScript, DynamoDBPersistenceLayer
// 2.35.0) for the same event and results of several sizes. idem's units are
// measured at the proxy on dynalite; Powertools' are computed from its
// record shape (ptItems, checked against an item it wrote: TestPtItems) by
// the capacity package's rules. `bench peers` measures both libraries at
// the workload's result size through the same proxy.

// recordSizes are the results compared: 0 is the workload's own (about 40
// bytes of JSON); the others, JSON orders of that many bytes (jsonResult).
var recordSizes = []int{0, 500, 1000, 4096, 10 << 10, 100 << 10}

// recordUnits are one library's record and units for one result.
type recordUnits struct {
	ReservedBytes  int     `json:"in_progress_item_bytes"`
	CompletedBytes int     `json:"completed_item_bytes"`
	ReserveWrite   float64 `json:"reserve_write_units"`
	CompleteWrite  float64 `json:"complete_write_units"`
	DuplicateWrite float64 `json:"duplicate_write_units"`
	// DuplicateRead is the consistent read of the completed item that
	// follows a duplicate's failed write where the server does not return
	// the item with the failure (dynalite); none on DynamoDB.
	DuplicateRead float64 `json:"duplicate_read_units_without_all_old"`
}

// recordRow is one result size.
type recordRow struct {
	ResultBytes int `json:"result_bytes"`
	// Idem is idem's record by layout (recordLayouts).
	Idem                 map[string]recordUnits `json:"idem"`
	Powertools           recordUnits            `json:"powertools"`
	PowertoolsValidation recordUnits            `json:"powertools_with_payload_validation"`
}

// recordLayout is a configuration of the DynamoDB store whose record is
// measured: its options, and the key of an event's item.
type recordLayout struct {
	name string
	opts []ddbstore.Option
	key  func(string) map[string]types.AttributeValue
}

var short = ddbstore.AttributeNames{Status: "s", Fingerprint: "f", LeaseToken: "t", LeaseUntil: "l", Attempts: "a",
	AttemptsCarried: "c", Retryable: "r", Error: "e", Result: "v", ResultEncoding: "z", ResultOmitted: "o", UpdatedAt: "u",
	ResultRef: "rr", ResultSHA256: "rh", ResultSize: "rs", Steps: "st", StepNames: "sn", StepsSize: "ss"}

func pkKey(attr, prefix string) func(string) map[string]types.AttributeValue {
	return func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{attr: &types.AttributeValueMemberS{Value: prefix + k}}
	}
}

// recordLayouts are the layouts compared: the default; results compressed
// from 512 bytes instead of 4 KB; one-letter attribute names; a single-table
// layout (prefixed partition key and a fixed sort key).
var recordLayouts = []recordLayout{
	{"default", nil, pkKey(ddbstore.DefaultKeyAttribute, "")},
	{"compress_from_512B", []ddbstore.Option{ddbstore.WithCompressionThreshold(512)}, pkKey(ddbstore.DefaultKeyAttribute, "")},
	{"short_attribute_names", []ddbstore.Option{ddbstore.WithKeyAttribute("k"), ddbstore.WithTTLAttribute("x"), ddbstore.WithAttributeNames(short)},
		pkKey("k", "")},
	{"single_table", []ddbstore.Option{ddbstore.WithKeyAttribute("PK"), ddbstore.WithSortKey("SK", "idempotency#"),
		ddbstore.WithKeyPrefix("orders#"), ddbstore.WithTTLAttribute("ttl")},
		func(k string) map[string]types.AttributeValue {
			m := pkKey("PK", "orders#")(k)
			m["SK"] = &types.AttributeValueMemberS{Value: "idempotency#"}
			return m
		}},
}

// recordRows measures idem's record for each result size and layout on e
// (dynalite) and computes Powertools'.
func recordRows(e *capEnv) ([]recordRow, error) {
	var rows []recordRow
	for _, size := range recordSizes {
		ev := makeEvent(fmt.Sprintf("record_%d", size), "cap", 0, 100)
		if size > 0 {
			ev.result = jsonResult(size)
		}
		row := recordRow{ResultBytes: len(ev.result), Idem: map[string]recordUnits{}}
		for _, l := range recordLayouts {
			iu, err := e.idemRecord(l, ev)
			if err != nil {
				return nil, err
			}
			row.Idem[l.name] = iu
		}
		var err error
		if row.Powertools, err = ptUnits(ev.result, false); err != nil {
			return nil, err
		}
		if row.PowertoolsValidation, err = ptUnits(ev.result, true); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// idemRecord runs a first execution of ev and a duplicate through a store
// of layout l on a table of its own, measuring each, and reads the item in
// progress (from the handler: that read is not among the units used) and
// completed (after both).
func (e *capEnv) idemRecord(l recordLayout, ev event) (recordUnits, error) {
	var u recordUnits
	table := "idem_bench_records_" + l.name
	if _, err := ddbstore.CreateTable(e.ctx, e.client, table, l.opts...); err != nil {
		return u, err
	}
	st, err := ddbstore.New(e.client, table, l.opts...)
	if err != nil {
		return u, err
	}
	r, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return u, err
	}
	bytesOf := func() (int, error) { return e.itemBytes(table, l.key(ev.key)) }
	name := fmt.Sprintf("record_%d_%s", len(ev.result), l.name)
	call := func(want idem.Verdict, h idem.Handler) error {
		out, err := r.Do(e.ctx, ev.key, ev.payload, h)
		if out.Verdict != want {
			return fmt.Errorf("%s got %s (%v), want %s", name, out.Verdict, err, want)
		}
		return nil
	}
	defer deleteTable(e.ctx, e.client, table)
	first, err := e.measure(name+"_first", "execution", 1, func() error {
		return call(idem.Executed, func(context.Context) ([]byte, error) {
			var err error
			u.ReservedBytes, err = bytesOf()
			return ev.result, err
		})
	})
	if err != nil {
		return u, err
	}
	dup, err := e.measure(name+"_duplicate", "execution", 1, func() error {
		return call(idem.Replayed, func(context.Context) ([]byte, error) { return nil, nil })
	})
	if err != nil {
		return u, err
	}
	u.ReserveWrite, u.CompleteWrite = first.Capacity.ByOp["UpdateItem"].Write, first.Capacity.ByOp["PutItem"].Write
	u.DuplicateWrite, u.DuplicateRead = dup.Capacity.ByOp["UpdateItem"].Write, dup.Capacity.ByOp["GetItem"].Read
	u.CompletedBytes, err = bytesOf()
	return u, err
}

// itemBytes reads an item of table (one consistent GetItem) and returns its
// size.
func (e *capEnv) itemBytes(table string, key map[string]types.AttributeValue) (int, error) {
	out, err := e.client.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: key})
	if err != nil {
		return 0, err
	}
	return capacity.Size(capacity.FromItem(out.Item)), nil
}

// ptKey is a Powertools key with the workload's prefix: "bench#" and the
// base64 of an MD5.
const ptKey = "bench#p17mCC/50YYjlGcLZCBXyQ=="

// ptItems returns the items Powertools writes for a result: in progress
// (_putRecord: id, expiration, status, in_progress_expiration, and
// validation when payload validation is on) and completed (_updateRecord:
// status, expiration, the result marshalled as a map in data, validation;
// in_progress_expiration stays).
func ptItems(result []byte, validation bool) (inProgress, completed capacity.Item, err error) {
	data, err := marshallJSON(result)
	if err != nil {
		return nil, nil, err
	}
	inProgress = capacity.Item{"id": capacity.S(ptKey), "expiration": capacity.N("1796373315"),
		"status": capacity.S("INPROGRESS"), "in_progress_expiration": capacity.N("1796369744503")}
	if validation {
		inProgress["validation"] = capacity.S("OLPv+Lr1ZidHjsdqcE6bUg==")
	}
	completed = capacity.Item{"data": data}
	for k, v := range inProgress {
		completed[k] = v
	}
	completed["status"] = capacity.S("COMPLETED")
	return inProgress, completed, nil
}

// ptUnits computes Powertools' units for a result: the reservation's put,
// the completion's update (billed on the larger of the items), a
// duplicate's failed put over the completed item, and the consistent read
// that follows it where the server returns no item with the failure.
func ptUnits(result []byte, validation bool) (recordUnits, error) {
	in, done, err := ptItems(result, validation)
	if err != nil {
		return recordUnits{}, err
	}
	a, b := capacity.Size(in), capacity.Size(done)
	return recordUnits{ReservedBytes: a, CompletedBytes: b, ReserveWrite: capacity.WriteUnits(a),
		CompleteWrite: capacity.WriteUnits(max(a, b)), DuplicateWrite: capacity.WriteUnits(max(a, b)),
		DuplicateRead: capacity.ReadUnits(b, true)}, nil
}

// marshallJSON converts a JSON document as the AWS SDK for JavaScript's
// marshall does a parsed object: objects to maps, arrays to lists, strings,
// numbers (as JavaScript prints them), booleans and null.
func marshallJSON(doc []byte) (capacity.Value, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return capacity.Value{}, err
	}
	return marshallValue(v), nil
}

func marshallValue(v any) capacity.Value {
	switch x := v.(type) {
	case map[string]any:
		m := capacity.Value{Kind: capacity.KindM, Map: capacity.Item{}}
		for k, e := range x {
			m.Map[k] = marshallValue(e)
		}
		return m
	case []any:
		l := capacity.Value{Kind: capacity.KindL}
		for _, e := range x {
			l.List = append(l.List, marshallValue(e))
		}
		return l
	case string:
		return capacity.S(x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return capacity.N(string(x))
		}
		return capacity.N(strconv.FormatFloat(f, 'f', -1, 64))
	case bool:
		return capacity.Value{Kind: capacity.KindBOOL, Scalar: strconv.FormatBool(x)}
	}
	return capacity.Value{Kind: capacity.KindNULL}
}

// recordsMarkdown is the table of records beside Powertools', and of
// idem's layouts.
func recordsMarkdown(rows []recordRow) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n| result B | library or layout | in-progress item B | completed item B | first execution write units (reserve + complete) | duplicate write units (+ read units where the server returns no item) |\n| ---: | --- | ---: | ---: | --- | --- |\n")
	for _, r := range rows {
		line := func(name string, x recordUnits) {
			fmt.Fprintf(&b, "| %d | %s | %d | %d | %s + %s | %s (+%s) |\n", r.ResultBytes, name, x.ReservedBytes, x.CompletedBytes,
				fmtUnits(x.ReserveWrite), fmtUnits(x.CompleteWrite), fmtUnits(x.DuplicateWrite), fmtUnits(x.DuplicateRead))
		}
		for _, l := range recordLayouts {
			line("idem "+l.name, r.Idem[l.name])
		}
		line("Powertools", r.Powertools)
		line("Powertools, payload validation", r.PowertoolsValidation)
	}
	return b.String()
}
