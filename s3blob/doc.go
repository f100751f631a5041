// Package s3blob is a blob.Store on Amazon S3: the objects of a bucket under
// a key prefix, written with one PutObject and read with one GetObject. It
// keeps results that are too large for a DynamoDB item even compressed
// (ddbstore.WithLargeResults).
//
// Put sends the object's SHA-256 (ChecksumSHA256), so that S3 refuses a body
// damaged on the way; Get asks for the stored checksum (ChecksumMode
// ENABLED) and checks the body against it, and the record that points at the
// object checks its own copy of the SHA-256 as well. A missing object
// (NoSuchKey, HTTP 404) is an error wrapping blob.ErrNotFound. Other errors
// keep the SDK's error in their chain; those the AWS SDK would retry
// (throttling such as SlowDown, HTTP 5xx, transport failures) are marked
// transient (awsclassify.Mark), and the rest, AccessDenied among them, are
// permanent.
//
// Objects are removed by a lifecycle rule, not by the store: LifecycleRule
// and EnsureLifecycle make one that expires the prefix's objects
// ExpirationDays(retention) days after they were written. S3 counts
// expiration in whole days and applies it lazily (an object is eligible at
// the midnight UTC after its expiry day, and is usually removed within a day
// after that), so the rule keeps each object at least one whole day longer
// than the retention of the record that points at it.
//
// Endpoints, credentials and retries come from the S3 client's
// configuration; a local S3-API server such as moto needs path-style
// addressing (s3.Options.UsePathStyle).
package s3blob
