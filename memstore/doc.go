// Package memstore is an in-memory idem.Store for tests, demos and
// single-process tools.
//
// What it does not promise: it is per-process and not durable. A restart
// forgets every record, two processes (two Lambda sandboxes, two containers)
// each have their own map and will both execute the same key, and nothing
// here is exactly-once: a crash after a handler's side effect but before its
// outcome is recorded means a retry runs the handler again. Within one
// process, reservation is atomic: of any number of concurrent callers, one
// executes. Handlers may stage writes (Stage, Write) that the store applies
// under its lock together with the success (idem.StagedCompleter). Use a
// shared store with atomic conditional writes (ddbstore) for
// anything that runs in more than one process.
package memstore
