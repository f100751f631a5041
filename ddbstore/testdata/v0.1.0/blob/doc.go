// Package blob is the contract of an object store that keeps what does not
// fit in a record: a result too large for a DynamoDB item even compressed
// (see ddbstore.WithLargeResults). A Store is two calls, Put and Get, by
// name; the s3blob package implements it on Amazon S3, and Memory keeps the
// objects in memory for tests and examples.
//
// The package imports only the standard library, so that a store can accept
// a blob.Store without importing an object store's SDK.
//
// Integrity is the caller's: a record keeps the SHA-256 of the object it
// points at (Sum) and checks what it reads back (Verify), so a replaced or
// damaged object is an error wrapping ErrMismatch, never wrong bytes; a
// missing object is an error wrapping ErrNotFound.
package blob
