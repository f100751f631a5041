// Package refusecommit is a store for tests whose commits of staged writes are
// refused as a whole, certainly writing nothing (idem.ErrCommitRefused), as
// ddbstore answers a transaction that DynamoDB cancels for a conflict on a
// hot staged item (transient) or refuses for access to a staged table
// (permanent). It stands in for DynamoDB where a test needs the runner's or
// a wrapper's side of a refused commit without a server; ddbstore's own
// tests reproduce each refusal on the wire.
package refusecommit
