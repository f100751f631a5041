// Package core is idem's pure state machine: key validation, payload
// fingerprints, the decision table, the transitions of a record, error
// classification and backoff.
//
// Nothing in core performs I/O, reads the clock or draws random numbers: the
// time, the random draw and the lease token are arguments, so every decision
// is a value that can be tested as a scripted timeline. core imports only the
// standard library.
//
// The decision table, for an arriving call whose fingerprint matches the
// stored one:
//
//	stored                               decision
//	none, or past retention              execute (reserve first)
//	in_progress, lease live              in progress, retry at the lease end
//	in_progress, lease expired           execute, taking the lease over
//	succeeded                            replay the stored result
//	failed, permanent                    replay the stored failure
//	failed, retryable, attempts left     execute again (attempts count across deliveries)
//	failed, attempts exhausted           reject: retries exhausted
//
// A stored record with another fingerprint is rejected (key reused), whatever
// its state; an invalid key is rejected before any record is read.
package core
