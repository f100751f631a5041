package ddbstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// Limits of the layout's values, from DynamoDB's key limits.
const (
	// maxKeyBytes is DynamoDB's limit on a partition key value: the prefix
	// and the key together.
	maxKeyBytes = 2048
	// maxSortKeyBytes is DynamoDB's limit on a sort key value.
	maxSortKeyBytes = 1024
	// MaxKeyPrefix is the longest prefix WithKeyPrefix accepts, in bytes:
	// half of DynamoDB's 2048-byte partition key, so that at least 1024
	// bytes remain for the key itself.
	MaxKeyPrefix = 1024
	// maxAttrName bounds attribute names (DynamoDB's limit for key
	// attributes, applied to all of the record's).
	maxAttrName = 255
)

// AttributeNames names the record's attributes other than the table's key
// attributes and the TTL attribute (WithKeyAttribute, WithSortKey,
// WithTTLAttribute). A field left empty keeps its default name, the
// constant of the same name (AttrStatus for Status, ...). The package
// documentation describes each attribute.
type AttributeNames struct {
	// Status names the status attribute (default AttrStatus).
	Status string
	// Fingerprint names the payload fingerprint (default AttrFingerprint).
	Fingerprint string
	// LeaseToken names the lease's fencing token (default AttrLeaseToken).
	LeaseToken string
	// LeaseUntil names the lease end, epoch milliseconds (default
	// AttrLeaseUntil).
	LeaseUntil string
	// Attempts names the execution count (default AttrAttempts).
	Attempts string
	// AttemptsCarried names the execution count that a one-write
	// reservation continues (default AttrAttemptsCarried).
	AttemptsCarried string
	// Retryable names the retryable flag of failures (default
	// AttrRetryable).
	Retryable string
	// Error names the failure's message (default AttrError).
	Error string
	// Result names the stored result (default AttrResult).
	Result string
	// ResultEncoding names the result's encoding (default
	// AttrResultEncoding).
	ResultEncoding string
	// ResultOmitted names the omitted-result flag (default
	// AttrResultOmitted).
	ResultOmitted string
	// UpdatedAt names the time of the last write, epoch milliseconds
	// (default AttrUpdatedAt).
	UpdatedAt string
	// ResultRef names the blob store object of a large result (default
	// AttrResultRef; see WithLargeResults).
	ResultRef string
	// ResultSHA256 names the large result object's SHA-256 (default
	// AttrResultSHA256).
	ResultSHA256 string
	// ResultSize names the large result object's size in bytes (default
	// AttrResultSize).
	ResultSize string
	// ResultItem names the reference of a result kept in an item of its
	// own (default AttrResultItem).
	ResultItem string
	// Steps names the list of completed steps (default AttrSteps).
	Steps string
	// StepNames names the set of the steps' names (default AttrStepNames).
	StepNames string
	// StepsSize names the steps' budgeted size (default AttrStepsSize).
	StepsSize string
	// StepsUntil names the earliest end of retention of the record's step
	// items (default AttrStepsUntil).
	StepsUntil string
}

// field is one of AttributeNames' fields with its default.
type field struct {
	def  string
	name *string
}

func (n *AttributeNames) fields() []field {
	return []field{
		{AttrStatus, &n.Status}, {AttrFingerprint, &n.Fingerprint}, {AttrLeaseToken, &n.LeaseToken},
		{AttrLeaseUntil, &n.LeaseUntil}, {AttrAttempts, &n.Attempts}, {AttrRetryable, &n.Retryable},
		{AttrError, &n.Error}, {AttrResult, &n.Result}, {AttrResultEncoding, &n.ResultEncoding},
		{AttrResultOmitted, &n.ResultOmitted}, {AttrUpdatedAt, &n.UpdatedAt},
		{AttrResultRef, &n.ResultRef}, {AttrResultSHA256, &n.ResultSHA256}, {AttrResultSize, &n.ResultSize},
		{AttrSteps, &n.Steps}, {AttrStepNames, &n.StepNames}, {AttrStepsSize, &n.StepsSize},
		{AttrAttemptsCarried, &n.AttemptsCarried}, {AttrStepsUntil, &n.StepsUntil},
		{AttrResultItem, &n.ResultItem},
	}
}

// DefaultAttributeNames returns the default names of the record attributes
// that AttributeNames renames (all but the key and TTL attributes), in a
// fixed order.
func DefaultAttributeNames() []string {
	var n AttributeNames
	fs := n.fields()
	defs := make([]string, len(fs))
	for i, f := range fs {
		defs[i] = f.def
	}
	return defs
}

// Rename sets the name of the record attribute whose default name is def,
// and reports false (changing nothing) if def is not one of
// DefaultAttributeNames.
func (n *AttributeNames) Rename(def, name string) bool {
	for _, f := range n.fields() {
		if f.def == def {
			*f.name = name
			return true
		}
	}
	return false
}

// resolved returns n with every empty field set to its default.
func (n AttributeNames) resolved() AttributeNames {
	for _, f := range n.fields() {
		if *f.name == "" {
			*f.name = f.def
		}
	}
	return n
}

// layout is where and under which names the store keeps its records.
type layout struct {
	keyAttr, ttlAttr string
	// sortAttr is the sort key's name, empty for a table without one;
	// its value is sortValue, or sortFunc's of the key when that is set.
	sortAttr, sortValue string
	sortFunc            func(key string) string
	prefix              string
	names               AttributeNames // resolved by buildOptions
}

// checkAttrName checks one attribute name on its own; buildOptions checks
// that the names are distinct.
func checkAttrName(what, name string) error {
	if name == "" || len(name) > maxAttrName || !utf8.ValidString(name) {
		return fmt.Errorf("ddbstore: %s attribute name %q must be 1 to %d bytes of UTF-8", what, name, maxAttrName)
	}
	if strings.HasPrefix(name, "aws:") {
		// DynamoDB's own attributes (global tables) begin with "aws:".
		return fmt.Errorf("ddbstore: %s attribute name %q: names beginning with aws: are DynamoDB's", what, name)
	}
	return nil
}

// WithSortKey addresses records by a sort key as well as the partition key,
// for a table with a string sort key named attr: every record's sort key is
// value (for example "idempotency#"), which must be 1 to 1024 bytes of
// UTF-8. The table must have that key schema (CreateTable makes it; see
// CheckTable). It replaces an earlier WithSortKey or WithSortKeyFunc.
func WithSortKey(attr, value string) Option {
	return func(o *options) error {
		if err := checkAttrName("sort key", attr); err != nil {
			return err
		}
		if value == "" || len(value) > maxSortKeyBytes || !utf8.ValidString(value) {
			return fmt.Errorf("ddbstore: sort key value of %d bytes must be 1 to %d bytes of UTF-8", len(value), maxSortKeyBytes)
		}
		o.sortAttr, o.sortValue, o.sortFunc = attr, value, nil
		return nil
	}
}

// WithSortKeyFunc is WithSortKey with a sort key value computed from the
// key: f receives the key as given to the store (without the prefix of
// WithKeyPrefix). f must be deterministic and safe for concurrent use; a
// value it returns that is empty or longer than 1024 bytes fails the call
// with ErrKeyTooLarge. It replaces an earlier WithSortKey or
// WithSortKeyFunc.
func WithSortKeyFunc(attr string, f func(key string) string) Option {
	return func(o *options) error {
		if err := checkAttrName("sort key", attr); err != nil {
			return err
		}
		if f == nil {
			return fmt.Errorf("ddbstore: nil sort key function")
		}
		o.sortAttr, o.sortValue, o.sortFunc = attr, "", f
		return nil
	}
}

// WithAttributeNames renames the record's attributes (see AttributeNames;
// empty fields keep their defaults). Every name, the key, sort key and TTL
// attributes' included, must be 1 to 255 bytes of UTF-8, must not begin
// with "aws:", and must differ from the others. DynamoDB's reserved words
// are allowed: the store names every attribute in its expressions through
// ExpressionAttributeNames. It replaces an earlier WithAttributeNames.
func WithAttributeNames(n AttributeNames) Option {
	return func(o *options) error {
		for _, f := range n.fields() {
			if *f.name == "" {
				continue
			}
			if err := checkAttrName(f.def, *f.name); err != nil {
				return err
			}
		}
		o.names = n
		return nil
	}
}

// WithKeyPrefix prepends prefix to every key in the table: the partition
// key's value is prefix followed by the key, so stores with different
// prefixes (one per service or action) can share a table without seeing
// each other's records, provided no prefix begins with another's ("orders#"
// and "payments#", not "orders#" and "orders#eu#"; the empty prefix begins
// every other). The prefix is part of the stored key: records
// written under one prefix are not found under another (changing it
// abandons the existing records until their retention ends), and operators'
// tools need the same prefix (cmd/idem's --key-prefix). It must be valid
// UTF-8 of at most MaxKeyPrefix bytes; the prefix and a key together must
// fit DynamoDB's 2048-byte partition key, or the call fails with
// ErrKeyTooLarge. Keys are given and returned without it.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) error {
		if len(prefix) > MaxKeyPrefix || !utf8.ValidString(prefix) {
			return fmt.Errorf("ddbstore: key prefix of %d bytes must be at most %d bytes of UTF-8", len(prefix), MaxKeyPrefix)
		}
		o.prefix = prefix
		return nil
	}
}

// checkLayout resolves the attribute names and checks that all of them
// are distinct.
func (l *layout) checkLayout() error {
	l.names = l.names.resolved()
	type role struct{ what, name string }
	all := []role{{"key", l.keyAttr}, {"TTL", l.ttlAttr}}
	if l.sortAttr != "" {
		all = append(all, role{"sort key", l.sortAttr})
	}
	for _, f := range l.names.fields() {
		all = append(all, role{f.def, *f.name})
	}
	seen := make(map[string]string, len(all))
	for _, r := range all {
		if err := checkAttrName(r.what, r.name); err != nil {
			return err
		}
		if other, ok := seen[r.name]; ok {
			return fmt.Errorf("ddbstore: the %s and %s attributes are both named %q", other, r.what, r.name)
		}
		seen[r.name] = r.what
	}
	return nil
}

// sortKey returns the sort key value of key (empty without a sort key).
func (l *layout) sortKey(key string) string {
	if l.sortFunc != nil {
		return l.sortFunc(key)
	}
	return l.sortValue
}

// keyOf returns the primary key of key's item.
func (l *layout) keyOf(key string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{l.keyAttr: &types.AttributeValueMemberS{Value: l.prefix + key}}
	if l.sortAttr != "" {
		k[l.sortAttr] = &types.AttributeValueMemberS{Value: l.sortKey(key)}
	}
	return k
}

// keyIn returns the primary key of item, an item the layout encoded: its
// key attributes' values, shared.
func (l *layout) keyIn(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{l.keyAttr: item[l.keyAttr]}
	if l.sortAttr != "" {
		k[l.sortAttr] = item[l.sortAttr]
	}
	return k
}

// checkKey returns nil if key's item key fits DynamoDB's limits, and else a
// permanent error wrapping ErrKeyTooLarge.
func (s *Store) checkKey(op, key string) error {
	if key == "" || len(s.prefix)+len(key) > maxKeyBytes {
		return s.fail(op, ErrKeyTooLarge, "key is %d bytes (prefix %d), want 1 to %d with the prefix", len(key), len(s.prefix), maxKeyBytes)
	}
	if s.sortAttr != "" {
		if sk := s.sortKey(key); sk == "" || len(sk) > maxSortKeyBytes {
			return s.fail(op, ErrKeyTooLarge, "sort key value is %d bytes, want 1 to %d", len(sk), maxSortKeyBytes)
		}
	}
	return nil
}

// owns reports whether item is one of the store's records by its key: its
// partition key has the store's prefix and its sort key, if any, is the
// one the store gives that key. Other items (other prefixes, other sort
// keys, other entities of a shared table) are not the store's.
func (l *layout) owns(item map[string]types.AttributeValue) bool {
	pk, ok := item[l.keyAttr].(*types.AttributeValueMemberS)
	if !ok {
		return false
	}
	key, ok := strings.CutPrefix(pk.Value, l.prefix)
	if !ok || l.sortAttr == "" {
		return ok
	}
	sk, ok := item[l.sortAttr].(*types.AttributeValueMemberS)
	return ok && key != "" && sk.Value == l.sortKey(key)
}

// keySchema returns the attribute definitions and key schema of a table
// for the layout.
func (l *layout) keySchema() ([]types.AttributeDefinition, []types.KeySchemaElement) {
	defs := []types.AttributeDefinition{{AttributeName: aws.String(l.keyAttr), AttributeType: types.ScalarAttributeTypeS}}
	schema := []types.KeySchemaElement{{AttributeName: aws.String(l.keyAttr), KeyType: types.KeyTypeHash}}
	if l.sortAttr != "" {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(l.sortAttr), AttributeType: types.ScalarAttributeTypeS})
		schema = append(schema, types.KeySchemaElement{AttributeName: aws.String(l.sortAttr), KeyType: types.KeyTypeRange})
	}
	return defs, schema
}

// schemaMatches reports whether table t has the layout's key schema.
func (l *layout) schemaMatches(t *types.TableDescription) bool {
	_, want := l.keySchema()
	if t == nil || len(t.KeySchema) != len(want) {
		return false
	}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	for i, k := range want {
		got := t.KeySchema[i]
		name := aws.ToString(k.AttributeName)
		if aws.ToString(got.AttributeName) != name || got.KeyType != k.KeyType || attrTypes[name] != types.ScalarAttributeTypeS {
			return false
		}
	}
	return true
}

// describeLayoutSchema says which key schema the layout needs.
func (l *layout) describeLayoutSchema() string {
	if l.sortAttr == "" {
		return fmt.Sprintf("a single string partition key %q", l.keyAttr)
	}
	return fmt.Sprintf("a string partition key %q and a string sort key %q", l.keyAttr, l.sortAttr)
}

// mismatch returns the *SchemaError of table t, whose key schema is not the
// layout's (schemaMatches is false), or nil if it is the layout's.
func (l *layout) mismatch(table string, t *types.TableDescription) *SchemaError {
	if l.schemaMatches(t) {
		return nil
	}
	return &SchemaError{Table: table, Have: describeSchema(t), Want: l.describeLayoutSchema(), Fix: l.fixFor(t)}
}

// fixFor names the options that would give the layout table t's key
// schema, or says that no option can.
func (l *layout) fixFor(t *types.TableDescription) string {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	var hash, sort string
	for _, k := range t.KeySchema {
		name := aws.ToString(k.AttributeName)
		if attrTypes[name] != types.ScalarAttributeTypeS {
			return fmt.Sprintf("no option fixes it: the store's key attributes are strings, and the table's %q is not; "+
				"use a table made for the store (ddbstore.CreateTable, the SAM template)", name)
		}
		if k.KeyType == types.KeyTypeHash {
			hash = name
		} else {
			sort = name
		}
	}
	var opts []string
	if hash != "" && hash != l.keyAttr {
		opts = append(opts, fmt.Sprintf("ddbstore.WithKeyAttribute(%q)", hash))
	}
	switch {
	case sort == "" && l.sortAttr != "":
		opts = append(opts, "no WithSortKey or WithSortKeyFunc (the table has no sort key)")
	case sort != "" && sort != l.sortAttr:
		opts = append(opts, fmt.Sprintf("ddbstore.WithSortKey(%q, value) or WithSortKeyFunc (a table shared with other items: see WithKeyPrefix)", sort))
	}
	if len(opts) == 0 {
		return "use a table made for the store (ddbstore.CreateTable, the SAM template)"
	}
	return "configure the store with " + strings.Join(opts, " and ")
}

// scanFilter returns the Scan filter that keeps the layout's items (and
// only records of status, when it is set), with its names and values; an
// empty expression when there is nothing to filter.
func (l *layout) scanFilter(status core.Status) (string, map[string]string, map[string]types.AttributeValue) {
	var conds []string
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	if l.prefix != "" {
		conds = append(conds, "begins_with(#k, :prefix)")
		names["#k"] = l.keyAttr
		values[":prefix"] = &types.AttributeValueMemberS{Value: l.prefix}
	}
	if l.sortAttr != "" && l.sortFunc == nil {
		conds = append(conds, "#sk = :sk")
		names["#sk"] = l.sortAttr
		values[":sk"] = &types.AttributeValueMemberS{Value: l.sortValue}
	}
	if status != "" {
		conds = append(conds, "#st = :st")
		names["#st"] = l.names.Status
		values[":st"] = &types.AttributeValueMemberS{Value: string(status)}
	}
	return strings.Join(conds, " AND "), names, values
}
