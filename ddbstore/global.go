package ddbstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
)

// Errors of a global table, found by CheckTable or Store.CheckTable,
// checked with errors.Is. Each is the Err of a *GlobalTableError, which
// also wraps idem.ErrMisconfigured. docs/multi-region.md says what each
// consistency mode of a global table means for idem.
var (
	// ErrEventualGlobalTable: the table is a global table in multi-Region
	// eventual consistency (MREC), and the store was given neither
	// WithHomeRegion nor WithReplicationWindowAccepted. A conditional write
	// there sees its own Region's replica only, and writes of one item in
	// two Regions are settled last writer wins: an event delivered in two
	// Regions within the replication lag can run twice, and a recorded
	// outcome be overwritten. Permanent.
	ErrEventualGlobalTable = errors.New("ddbstore: global table with multi-Region eventual consistency (MREC)")
	// ErrNotHomeRegion: the store was given WithHomeRegion, and the
	// table's replica its client reaches is in another Region. Permanent.
	ErrNotHomeRegion = errors.New("ddbstore: the store's client does not reach the home Region")
	// ErrNoTransactions: the table is a global table in multi-Region strong
	// consistency (MRSC), which does not support transactions, so the
	// writes a handler stages cannot be committed with its outcome: after
	// Store.CheckTable found it, each idem.Stage (ddbstore.Stage) fails
	// with it (and idem.ErrNoStaging). Nothing is staged.
	ErrNoTransactions = errors.New("ddbstore: global table with multi-Region strong consistency (MRSC): no transactions")
)

// GlobalTableError is a global table that the store's configuration does
// not fit (ErrEventualGlobalTable, ErrNotHomeRegion), or a staged write
// refused because the table cannot commit it (ErrNoTransactions). It wraps
// Err and idem.ErrMisconfigured (the runner logs it at ERROR), and, for
// ErrNoTransactions, idem.ErrNoStaging. Found with errors.As.
type GlobalTableError struct {
	// Table is the table's name.
	Table string
	// Region is the Region of the replica the store's client reached, as
	// the table's ARN names it ("" if DescribeTable returned none).
	Region string
	// Replicas are the Regions of the table's other replicas, as
	// DescribeTable lists them.
	Replicas []string
	// Consistency is the table's multi-Region consistency as DescribeTable
	// reports it: EVENTUAL, STRONG, or "" (a global table created before
	// MRSC existed reports none, and is MREC).
	Consistency types.MultiRegionConsistency
	// Home is the Region WithHomeRegion named, or "".
	Home string
	// Err is ErrEventualGlobalTable, ErrNotHomeRegion or ErrNoTransactions.
	Err error
}

// Error names the risk and its fixes.
func (e *GlobalTableError) Error() string {
	where := fmt.Sprintf("table %q has replicas in %s besides %s", e.Table, strings.Join(e.Replicas, ", "), orUnknown(e.Region))
	switch {
	case errors.Is(e.Err, ErrNotHomeRegion):
		return fmt.Sprintf("%v: it reaches the replica in %s, and WithHomeRegion names %s; build the store's DynamoDB client "+
			"for %s (config.WithRegion(%q)) in every Region (docs/multi-region.md)", e.Err, orUnknown(e.Region), e.Home, e.Home, e.Home)
	case errors.Is(e.Err, ErrNoTransactions):
		return fmt.Sprintf("%v: %s, in strong consistency, on which DynamoDB refuses transactions: the writes a handler stages "+
			"(idem.Stage) cannot be committed with its outcome; write them from the handler with conditions of their own, "+
			"or keep the idempotency table out of MRSC (docs/multi-region.md)", e.Err, where)
	}
	return fmt.Sprintf("%v: %s; a conditional write is checked against its own Region's replica only and writes of one item "+
		"in two Regions are settled last writer wins, silently, so an event delivered in two Regions within the replication lag "+
		"can run twice and a recorded outcome be overwritten; either send every store call to one Region "+
		"(ddbstore.WithHomeRegion(%q), with a client of that Region, in every Region), or accept that window by name "+
		"(ddbstore.WithReplicationWindowAccepted()) (docs/multi-region.md)", e.Err, where, orUnknown(e.Region))
}

// Unwrap returns Err and idem.ErrMisconfigured, and idem.ErrNoStaging for
// ErrNoTransactions.
func (e *GlobalTableError) Unwrap() []error {
	if errors.Is(e.Err, ErrNoTransactions) {
		return []error{e.Err, idem.ErrMisconfigured, idem.ErrNoStaging}
	}
	return []error{e.Err, idem.ErrMisconfigured}
}

func orUnknown(region string) string {
	if region == "" {
		return "its own Region (unnamed)"
	}
	return region
}

// replication is how the store's calls meet a global table's replicas
// (WithHomeRegion, WithReplicationWindowAccepted). The zero value accepts
// no global table in eventual consistency.
type replication struct {
	home           string
	windowAccepted bool
}

// WithHomeRegion says that every store call goes to the table's replica in
// region, from every Region the functions run in: the store's client is
// made for region (config.WithRegion(region) when loading the AWS
// configuration). On a global table in multi-Region eventual consistency
// (MREC) this is AWS's advice for conditional writes, and idem then
// promises there what it promises in one Region. CheckTable and
// Store.CheckTable check that the replica the client reaches is in region
// (ErrNotHomeRegion), whatever the table. Calls from other Regions cross
// Regions (a round trip each). Changing the home Region at once leaves a
// window: writes not yet replicated to the new home may be missed there
// (docs/multi-region.md measures it, and describes the switch without it).
func WithHomeRegion(region string) Option {
	return func(o *options) error {
		if !validRegion(region) {
			return fmt.Errorf("ddbstore: home region %q: want a Region name such as \"eu-west-1\"", region)
		}
		o.repl.home = region
		return nil
	}
}

// WithReplicationWindowAccepted lets CheckTable and Store.CheckTable pass
// a global table in multi-Region eventual consistency (MREC) whose replicas
// the store's calls reach in several Regions, accepting what that costs
// (ErrEventualGlobalTable): for an event delivered in two Regions within
// the replication lag, two runs of the handler and an outcome overwritten.
// docs/multi-region.md measures it. Use it only for handlers that are safe
// to run twice.
func WithReplicationWindowAccepted() Option {
	return func(o *options) error {
		o.repl.windowAccepted = true
		return nil
	}
}

// validRegion reports whether s looks like an AWS Region name: lower-case
// letters, digits and hyphens, starting with a letter.
func validRegion(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// check returns the *GlobalTableError of table t for the store's calls,
// or nil: t is not a global table, or the options fit it. strong reports
// an MRSC table.
func (r replication) check(table string, t *types.TableDescription) (strong bool, err *GlobalTableError) {
	g := describeGlobal(table, t)
	g.Home = r.home
	if r.home != "" && g.Region != r.home {
		g.Err = ErrNotHomeRegion
		return false, g
	}
	if len(g.Replicas) == 0 {
		return false, nil
	}
	if g.Consistency == types.MultiRegionConsistencyStrong {
		return true, nil
	}
	if r.home == "" && !r.windowAccepted {
		g.Err = ErrEventualGlobalTable
		return false, g
	}
	return false, nil
}

// describeGlobal reads a table description's Region (from its ARN), its
// other replicas' Regions and its consistency mode. A table is global when
// DescribeTable lists a replica (in any state: one being created already
// receives writes) or a witness (MRSC with two replicas and a witness).
func describeGlobal(table string, t *types.TableDescription) *GlobalTableError {
	g := &GlobalTableError{Table: table, Consistency: t.MultiRegionConsistency}
	if parts := strings.SplitN(aws.ToString(t.TableArn), ":", 6); len(parts) == 6 {
		g.Region = parts[3]
	}
	for _, r := range t.Replicas {
		g.Replicas = append(g.Replicas, aws.ToString(r.RegionName))
	}
	for _, w := range t.GlobalTableWitnesses {
		g.Replicas = append(g.Replicas, aws.ToString(w.RegionName)+" (witness)")
	}
	return g
}
