package ddbstore

import (
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// requestParts are the parts of the store's requests that are the same in
// every call: expression attribute names, constant expression values and
// the pieces of the acquisition's update expression. New builds them once
// per store. The maps are shared by the requests of every call: nothing
// writes to them after New (the SDK reads its input and writes none of it),
// and a request that needs other names or values copies them first.
type requestParts struct {
	// acquireNames are the placeholders of an acquisition (recordPlaceholders
	// and the steps' attributes, which only its condition reads).
	acquireNames map[string]string
	// acquireValues are an acquisition's constant values.
	acquireValues map[string]types.AttributeValue
	// acquireSlots are the attributes an acquisition sets or removes, in
	// placeholder order: all of recordPlaceholders' but the key and the
	// counts.
	acquireSlots []updateSlot
	// updateLen bounds the length of an acquisition's update expression.
	updateLen int
	// completeNames are the placeholders of completeCondition.
	completeNames map[string]string
	// inProgress is the value of the in_progress status, in conditions.
	inProgress types.AttributeValue
	// table, acquireCondition and completeCondition are the table's name
	// and those conditions, as the SDK's inputs point at them.
	table, acquireCondition, completeCondition *string
}

// updateSlot is one attribute of an acquisition's update: its placeholder,
// its name in the item, the placeholder of the value it is set to, and its
// SET clause.
type updateSlot struct {
	placeholder, attr, value, set string
}

// acquireSet is the start of every acquisition's update expression: the
// counts, which it computes on the server.
const acquireSet = "SET #att = " + acquireCount + ", #carried = " + acquireCount

func newRequestParts(s *Store) requestParts {
	n := &s.names
	inProgress := &types.AttributeValueMemberS{Value: string(core.StatusInProgress)}
	r := requestParts{
		acquireNames: s.recordPlaceholders(),
		acquireValues: map[string]types.AttributeValue{
			":in_progress": inProgress,
			":failed":      &types.AttributeValueMemberS{Value: string(core.StatusFailed)},
			":true":        &types.AttributeValueMemberBOOL{Value: true},
			":zero":        num(0), ":one": num(1),
		},
		completeNames: map[string]string{"#st": n.Status, "#tok": n.LeaseToken, "#exp": s.ttlAttr, "#lease": n.LeaseUntil},
		inProgress:    inProgress,
		table:         aws.String(s.table), acquireCondition: aws.String(acquireCondition), completeCondition: aws.String(completeCondition),
	}
	for _, ph := range slices.Sorted(maps.Keys(r.acquireNames)) {
		if ph == "#k" || ph == "#att" || ph == "#carried" {
			continue
		}
		v := ":set_" + ph[1:]
		r.acquireSlots = append(r.acquireSlots, updateSlot{placeholder: ph, attr: r.acquireNames[ph], value: v, set: ph + " = " + v})
		r.updateLen += len(", ") + len(ph+" = "+v)
	}
	r.updateLen += len(acquireSet) + len(" REMOVE ")
	// In the condition only: the update leaves the steps as they are.
	r.acquireNames["#steps"], r.acquireNames["#until"] = n.Steps, n.StepsUntil
	return r
}
