package ddbstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// stepRef names a step item: the first bytes of a SHA-256 over the step's
// name and result. A record's steps list holds it (binary) in the step's
// place; the step item's key ends with it (hex). Step items are addressed by
// their content, so that no writer can change what a reference names: a
// stale holder, an earlier lifetime of the key, or a retried write that
// writes the same reference writes the same step.
type stepRef [stepRefSize]byte

// stepRefSize is the length of a step reference in bytes.
const stepRefSize = 8

// stepSuffix separates the record's key from a step item's reference in the
// step item's key: its partition key (a table without a sort key) or its
// sort key.
const stepSuffix = "#step#"

// stepKeyGrowth is what a step item's key adds to its record's.
const stepKeyGrowth = len(stepSuffix) + 2*stepRefSize

// refOf returns step's reference: shortHash of a domain label, the name
// and the result.
func refOf(step core.Step) stepRef {
	return shortHash([]byte("idem/step/v1"), []byte(step.Name), step.Result)
}

// shortHash returns the first stepRefSize bytes of a SHA-256 over parts,
// each preceded by its length as 8 bytes big-endian: the name of an item
// of a record's (a step item, a result item) by its content.
func shortHash(parts ...[]byte) [stepRefSize]byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var ref [stepRefSize]byte
	copy(ref[:], h.Sum(nil))
	return ref
}

// stepItemKey returns the primary key of key's step item ref (see
// childKey).
func (s *Store) stepItemKey(key string, ref stepRef) map[string]types.AttributeValue {
	return s.childKey(key, stepSuffix+hex.EncodeToString(ref[:]))
}

// childKey returns the primary key of an item of key's record (a step
// item, a result item) whose key ends with suffix: the record's partition
// key followed by it (a table without a sort key), or the record's
// partition key and its sort key followed by it.
func (s *Store) childKey(key, suffix string) map[string]types.AttributeValue {
	if s.sortAttr == "" {
		return map[string]types.AttributeValue{s.keyAttr: &types.AttributeValueMemberS{Value: s.prefix + key + suffix}}
	}
	return map[string]types.AttributeValue{
		s.keyAttr:  &types.AttributeValueMemberS{Value: s.prefix + key},
		s.sortAttr: &types.AttributeValueMemberS{Value: s.sortKey(key) + suffix},
	}
}

// stepItem returns the step item of key's step: its key, the step as the
// only element of its steps list, and its end of retention (ttl, epoch
// seconds; none when 0).
func (s *Store) stepItem(key string, step core.Step, ttl int64) map[string]types.AttributeValue {
	item := s.stepItemKey(key, refOf(step))
	item[s.names.Steps] = &types.AttributeValueMemberL{Value: []types.AttributeValue{stepValue(step)}}
	if ttl > 0 {
		item[s.ttlAttr] = num(ttl)
	}
	return item
}

// stepValue is a step as its step item holds it: a map of "n" (S, its
// name) and "r" (B, its result; absent when empty).
func stepValue(step core.Step) types.AttributeValue {
	m := map[string]types.AttributeValue{"n": &types.AttributeValueMemberS{Value: step.Name}}
	if len(step.Result) > 0 {
		m["r"] = &types.AttributeValueMemberB{Value: step.Result}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// stepOfValue reads a step written by stepValue.
func stepOfValue(v *types.AttributeValueMemberM) (core.Step, error) {
	r := itemReader{item: v.Value}
	st := core.Step{Name: r.str("n", true), Result: r.result("r", "")}
	return st, r.err
}

// isStepItem reports whether item is one of the store's step items: its
// key (the partition key, or the sort key where the table has one) ends
// with stepSuffix and a reference, and it has a steps list and no status.
func (l *layout) isStepItem(item map[string]types.AttributeValue) bool {
	return l.isChildItem(item, stepSuffix) && item[l.names.Steps] != nil
}

// isChildItem reports whether item's key (the partition key, or the sort
// key where the table has one) ends with suffix and the hex of a
// reference, and it has no status: an item of a record's (childKey).
func (l *layout) isChildItem(item map[string]types.AttributeValue, suffix string) bool {
	name := l.keyAttr
	if l.sortAttr != "" {
		name = l.sortAttr
	}
	growth := len(suffix) + 2*stepRefSize
	k, ok := item[name].(*types.AttributeValueMemberS)
	if !ok || len(k.Value) < growth || k.Value[len(k.Value)-growth:][:len(suffix)] != suffix {
		return false
	}
	if _, err := hex.DecodeString(k.Value[len(k.Value)-2*stepRefSize:]); err != nil {
		return false
	}
	return item[l.names.Status] == nil
}

// checkStepItem returns nil if key's step item for step fits DynamoDB's key
// limits and the item size limit, and else a permanent error wrapping
// ErrKeyTooLarge or ErrItemTooLarge.
func (s *Store) checkStepItem(op, key string, step core.Step) error {
	if s.sortAttr == "" && len(s.prefix)+len(key)+stepKeyGrowth > maxKeyBytes {
		return s.fail(op, ErrKeyTooLarge, "key is %d bytes (prefix %d): its step items need %d bytes more, at most %d with the prefix",
			len(key), len(s.prefix), stepKeyGrowth, maxKeyBytes)
	}
	if s.sortAttr != "" && len(s.sortKey(key))+stepKeyGrowth > maxSortKeyBytes {
		return s.fail(op, ErrKeyTooLarge, "sort key value is %d bytes: its step items need %d bytes more, at most %d",
			len(s.sortKey(key)), stepKeyGrowth, maxSortKeyBytes)
	}
	if size := ItemSize(s.stepItem(key, step, 1<<40)); size > s.maxItem {
		return s.fail(op, ErrItemTooLarge, "step %q of %d bytes: its item is %d bytes, at most %d", step.Name, len(step.Result), size, s.maxItem)
	}
	return nil
}

// putStepItem writes key's step item for step, with one PutItem that
// replaces an item of the same reference only if it ends before ttl (none:
// 0): a step item is never shortened. Refused, the item stored is read (from
// the error, or one consistent GetItem) and must hold step: it then lives
// at least as long as asked.
func (s *Store) putStepItem(ctx context.Context, op, key string, step core.Step, ttl int64) error {
	cond, values := "attribute_not_exists(#k) OR #ttl < :ttl", map[string]types.AttributeValue{":ttl": num(ttl)}
	if ttl == 0 {
		cond, values = "attribute_not_exists(#k) OR attribute_exists(#ttl)", nil
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                s.stepItem(key, step, ttl),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#k": s.keyAttr, "#ttl": s.ttlAttr},
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		if err != nil {
			return s.translate(ctx, op, err).err
		}
		return nil
	}
	ref := refOf(step)
	item := ccf.Item
	if len(item) == 0 {
		found, err := s.readStepItems(ctx, op, key, []stepRef{ref})
		if err != nil {
			return err
		}
		return s.sameStep(op, found[ref], step)
	}
	stored, err := s.stepOfItem(item, ref)
	if err != nil {
		return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
	}
	return s.sameStep(op, stored, step)
}

// sameStep returns nil if stored, a step item's step, is step, and else a
// permanent error wrapping ErrCorruptRecord (two steps with one reference).
func (s *Store) sameStep(op string, stored, step core.Step) error {
	if refOf(stored) == refOf(step) && stored.Name == step.Name && string(stored.Result) == string(step.Result) {
		return nil
	}
	return core.MarkPermanent(&Error{Op: op, Table: s.table,
		Err: fmt.Errorf("%w: step %q and step %q share a reference", ErrCorruptRecord, step.Name, stored.Name)})
}

// stepOfItem returns the step a step item holds, checked against ref: its
// steps list has one element, the step (stepValue).
func (s *Store) stepOfItem(item map[string]types.AttributeValue, ref stepRef) (core.Step, error) {
	l, ok := item[s.names.Steps].(*types.AttributeValueMemberL)
	var m *types.AttributeValueMemberM
	if ok && len(l.Value) == 1 {
		m, ok = l.Value[0].(*types.AttributeValueMemberM)
	}
	if !ok || m == nil {
		return core.Step{}, fmt.Errorf("%w: step item %x does not hold its step", ErrCorruptRecord, ref[:])
	}
	st, err := stepOfValue(m)
	if err == nil && refOf(st) != ref {
		err = fmt.Errorf("%w: step item %x does not hold its step", ErrCorruptRecord, ref[:])
	}
	return st, err
}

// maxBatchGet is BatchGetItem's limit on keys per call; maxBatchRounds
// bounds the calls made for keys DynamoDB left unprocessed (throttling).
const (
	maxBatchGet    = 100
	maxBatchRounds = 4
)

// readStepItems reads key's step items refs with consistent reads, in
// calls of up to 100 keys (BatchGetItem), and returns their steps, checked. A step item that is missing is
// ErrCorruptRecord (a record never references an item it did not write
// first, and step items outlive their records); keys still unprocessed
// after maxBatchRounds calls are ErrThrottled, transient.
func (s *Store) readStepItems(ctx context.Context, op, key string, refs []stepRef) (map[stepRef]core.Step, error) {
	items := make([]map[string]types.AttributeValue, 0, len(refs))
	for start := 0; start < len(refs); start += maxBatchGet {
		got, err := s.getItems(ctx, op, key, refs[start:min(start+maxBatchGet, len(refs))])
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
	}
	byKey := make(map[string]map[string]types.AttributeValue, len(items))
	for _, it := range items {
		byKey[describeKey(s, it)] = it
	}
	steps := make(map[stepRef]core.Step, len(refs))
	for _, ref := range refs {
		it, ok := byKey[describeKey(s, s.stepItemKey(key, ref))]
		if !ok {
			return nil, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: step item %x is missing", ErrCorruptRecord, ref[:])})
		}
		st, err := s.stepOfItem(it, ref)
		if err != nil {
			return nil, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
		}
		steps[ref] = st
	}
	return steps, nil
}

// describeKey is the identity of an item by its key attributes' values.
func describeKey(s *Store, item map[string]types.AttributeValue) string {
	id := ""
	for _, name := range s.keyNames() {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			id += v.Value + "\x00"
		}
	}
	return id
}

// getItems reads the step items of up to 100 refs: one BatchGetItem, and
// more for the keys it leaves unprocessed.
func (s *Store) getItems(ctx context.Context, op, key string, refs []stepRef) ([]map[string]types.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(refs))
	for i, ref := range refs {
		keys[i] = s.stepItemKey(key, ref)
	}
	var items []map[string]types.AttributeValue
	for round := 0; len(keys) > 0; round++ {
		if round == maxBatchRounds {
			return nil, core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: %d step items left unprocessed after %d calls", ErrThrottled, len(keys), round)})
		}
		out, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
		}}, s.calls.fns...)
		if err != nil {
			return nil, s.translate(ctx, op, err).err
		}
		items = append(items, out.Responses[s.table]...)
		keys = out.UnprocessedKeys[s.table].Keys
	}
	return items, nil
}

// resolveSteps sets rec.Steps, the steps of the stored item, in order: the
// steps the record keeps as they are, and each reference by the step of
// known with that reference or else by its step item, read with
// readStepItems. It reads nothing when every reference is known.
func (s *Store) resolveSteps(ctx context.Context, op string, item map[string]types.AttributeValue, rec *core.Record, known []core.Step) error {
	r := itemReader{item: item}
	entries := r.stepEntries(s.names.Steps) // none where the list does not decode
	have := make(map[stepRef]core.Step, len(known))
	for _, st := range known {
		have[refOf(st)] = st
	}
	var missing []stepRef
	for _, e := range entries {
		if _, ok := have[e.ref]; e.isRef && !ok {
			missing = append(missing, e.ref)
		}
	}
	if len(missing) > 0 {
		read, err := s.readStepItems(ctx, op, rec.Key, missing)
		if err != nil {
			return err
		}
		for ref, st := range read {
			have[ref] = st
		}
	}
	if r.err != nil {
		return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: r.err})
	}
	rec.Steps = nil
	for _, e := range entries {
		if e.isRef {
			e.step = have[e.ref]
		}
		rec.Steps = append(rec.Steps, e.step)
	}
	return nil
}

// hasStepRefs reports whether item's steps list references a step item.
func (s *Store) hasStepRefs(item map[string]types.AttributeValue) bool {
	l, ok := item[s.names.Steps].(*types.AttributeValueMemberL)
	if !ok {
		return false
	}
	for _, e := range l.Value {
		if _, ok := e.(*types.AttributeValueMemberB); ok {
			return true
		}
	}
	return false
}

// extendStepItems makes the step items of stored (its item, item) end
// their retention no earlier than a record that ends at expires needs
// (itemEnd): it reads them, writes them again to end later (putStepItem),
// and then sets the record's steps_until with one UpdateItem conditioned on
// the record being still the one read (its token and status), with the
// same steps and steps_until. A record that changed meanwhile is left as it
// is: the caller's next write is refused again, or is not. Where no step
// item ends too early it does nothing.
func (s *Store) extendStepItems(ctx context.Context, op string, item map[string]types.AttributeValue, stored core.Record, expires, now time.Time) error {
	st, err := s.storedStepsOf(item)
	if err != nil {
		return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
	}
	ttl, again := st.itemEnd(expires, st.until, now)
	if !again {
		return nil
	}
	var refs []stepRef
	for _, e := range st.entries {
		if e.isRef {
			refs = append(refs, e.ref)
		}
	}
	steps, err := s.readStepItems(ctx, op, stored.Key, refs)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if err := s.putStepItem(ctx, op, stored.Key, steps[ref], ttl); err != nil {
			return err
		}
	}
	n := &s.names
	values := map[string]types.AttributeValue{":old": num(st.until), ":n": num(int64(len(st.entries))),
		":st": &types.AttributeValueMemberS{Value: string(stored.Status)}, ":tok": &types.AttributeValueMemberS{Value: stored.LeaseToken}}
	update := "REMOVE #until" // items that never end
	if ttl > 0 {
		update, values[":ttl"] = "SET #until = :ttl", num(ttl)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.keyOf(stored.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#st = :st AND #tok = :tok AND size(#steps) = :n AND #until = :old"),
		ExpressionAttributeNames:  map[string]string{"#until": n.StepsUntil, "#st": n.Status, "#tok": n.LeaseToken, "#steps": n.Steps},
		ExpressionAttributeValues: values,
	}, s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return s.translate(ctx, op, err).err
	}
	return nil
}

// defaultStepSpan is the retention span a store assumes before it has seen
// a reservation (see stepSpan).
const defaultStepSpan = 24 * time.Hour

// stepSpan is what a store knows of its records' retention: the span from
// a reservation's time to its end of retention, as last seen. Step items
// are written to end one such span after their record (stepTTL). Safe for
// concurrent use; the zero value knows nothing.
type stepSpan struct{ ns atomic.Int64 }

// learn records that a record written at now ends its retention at expires.
func (sp *stepSpan) learn(expires, now time.Time) {
	if d := expires.Sub(now); !expires.IsZero() && d > 0 {
		sp.ns.Store(int64(d))
	}
}

// ttl is the end of retention, in epoch seconds, of a step item written
// at now: two spans later, so that it outlives a record that ends its
// retention one span after now and is written again (a failure, a retry)
// within that span. RecordStep's condition checks it against the record.
func (sp *stepSpan) ttl(now time.Time) int64 {
	d := time.Duration(sp.ns.Load())
	if d <= 0 {
		d = defaultStepSpan
	}
	return ceilSeconds(now.Add(2 * d))
}
