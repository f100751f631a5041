package ddbstore

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// Records written by earlier releases are read here and nowhere else: one
// function per earlier encoding, each naming the release that drops it. A
// record lives for its retention, so a release reads the encoding of the
// release before it for as long as a rolling deployment, or a record
// written just before it, may hand it one, and no longer: upgrade one
// release at a time, or let the older release's records pass their
// retention first. The store writes only its own encoding (docs/dynamodb.md,
// "Records of earlier versions"). CHANGELOG.md lists the releases.

// stepOfV010 reads an element of a record's steps list that is a map: a
// step kept in the record itself, as v0.1.0 kept every step (a map of "n",
// the step's name, and "r", its result, absent when empty). This release
// keeps each step in an item of its own and references it from the list
// (stepEntries); it writes no such map into a record, but continues a
// record that holds them (a takeover or a retry keeps its list, to which
// the references of new steps are appended) and replaces it whole
// otherwise. Dropped in v0.3.0.
func stepOfV010(e *types.AttributeValueMemberM) (core.Step, error) {
	return stepOfValue(e)
}

// stepCostV010 is what v0.1.0 budgeted for a step kept in the record (its
// map, its name in the set of names, and the growth of the size counter),
// and so the most a step of a record takes: a failure that keeps a record's
// steps (fitFailure) leaves them that much room. Dropped in v0.3.0, after
// which a step takes its reference's refCost.
func stepCostV010(step core.Step) int {
	return 2*len(step.Name) + len(step.Result) + 16
}
