// Package storetest is the conformance suite every idem.Store passes, in two
// parts.
//
// Run checks the contract: each transition of the decision table, retention
// expiry treated as absence, lease takeover with fencing (a stale holder's
// completion is refused), retried writes recognised, and the race where 64
// goroutines reserve one key and exactly one wins.
//
// RunFaults checks that the contract holds while the store's requests fail:
// refused before they are sent, throttled, timed out, or applied and their
// answers lost. The store's transport asks a Faults script what to do with
// each request; the suite scripts the faults, directly and through an
// idem.Runner, and checks that nothing is applied twice, nothing refused is
// applied, a failed read is never taken for absence, and no outcome is lost.
//
// For stores that also implement idem.Releaser, Run checks that Release
// deletes only the record that was read (a record taken over, completed or
// retried since is refused with idem.ErrRecordChanged), and that of
// concurrent Releases of one record exactly one succeeds; where they also
// record steps, that a released key's steps are gone with its record. For
// stores that implement idem.LeaseRenewer, it checks that a renewal extends
// only its holder's live lease (and the retention with it), that a retried
// renewal is recognised, and, through an idem.Runner with
// idem.WithLeaseRenewal, that a long handler keeps its key and a crashed
// holder's key is free one lease term after its last renewal.
//
// RunStaged checks the record's side of idem.StagedCompleter (staged writes
// committed atomically with a success): a stale holder's commit, a commit
// over another outcome and a commit after retention are refused as a whole
// with idem.ErrLeaseLost and apply nothing; a retried commit is recognised;
// through an idem.Runner with lease renewal and steps (where the store has
// them), the staged write lands once with the success. The caller passes
// the store's own writes (NewWrite).
//
// For stores that also implement idem.Acquirer, Run checks the one-write
// reservation: what it replaces (core.Acquirable), the attempt it counts
// (core.Acquire), the conflicts it returns, its retried writes, and the
// race where 64 goroutines acquire one key and exactly one wins.
//
// It is an ordinary package that uses only the standard library's testing
// package. A store's tests call both:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idem.Store { return memstore.New() })
//	}
//
//	func TestConformanceFaults(t *testing.T) {
//		storetest.RunFaults(t, func(t *testing.T, f *storetest.Faults) idem.Store {
//			return newStoreWithTransport(t, f) // every request asks f.Next first
//		})
//	}
//
// Every subtest uses its own key prefix, so newStore may return the same
// store (or table) each time. Times are whole seconds, so stores that keep
// retention in epoch seconds and leases in milliseconds represent them
// exactly. docs/writing-a-store.md says how to inject the faults and lists
// what every subtest checks.
package storetest
