// Package storetest is the conformance suite every idem.Store passes: each
// transition of the decision table, retention expiry treated as absence,
// lease takeover with fencing (a stale holder's completion is refused), and
// the race where 64 goroutines reserve one key and exactly one wins. For
// stores that also implement idem.Releaser, it checks that Release deletes
// only the record that was read (a record taken over, completed or retried
// since is refused with idem.ErrRecordChanged), and that of concurrent
// Releases of one record exactly one succeeds.
//
// It is an ordinary package that uses only the standard library's testing
// package. A store's tests call Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idem.Store { return memstore.New() })
//	}
//
// Every subtest uses its own key prefix, so newStore may return the same
// store (or table) each time. Times are whole seconds, so stores that keep
// retention in epoch seconds and leases in milliseconds represent them
// exactly.
package storetest
