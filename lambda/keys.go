package idemlambda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
)

// Source says where a wrapper finds the event identity of an event or a
// record of type E; EventKey turns the identity and the wrapper's action
// into the stored key. KeySource (SQS and SNS messages), KinesisKeySource
// and DynamoDBKeySource are its instances, with ready-made sources each;
// KeyFromFunc makes one from a function and KeyFromAll one from several.
// The zero value is not usable: the wrappers refuse it. A Source is
// immutable and safe for concurrent use.
type Source[E any] struct {
	name string
	get  func(E) (string, error)
}

// String names the source, for logs.
func (s Source[E]) String() string { return s.name }

// EventID returns the event identity of ev, or an error wrapping
// ErrMissingKey (an empty identity is one).
func (s Source[E]) EventID(ev E) (string, error) {
	return sourceEventID(s.name, s.get, ev)
}

// sourceEventID is the event identity that a key source named name finds
// in ev with get, for every event type: a zero source (nil get) and an empty
// identity are errors wrapping ErrMissingKey.
func sourceEventID[E any](name string, get func(E) (string, error), ev E) (string, error) {
	if get == nil {
		return "", fmt.Errorf("%w: zero key source", ErrMissingKey)
	}
	id, err := get(ev)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrMissingKey, name)
	}
	return id, nil
}

// KeyFromFunc returns the key source that takes the identity from fn, for
// any wrapper's event type: KeyFromFunc("order id", func(m
// events.SQSMessage) (string, error) { ... }) is a KeySource. name names the
// source in logs (default "key function"). The identity must be non-empty;
// like every identity it is hashed with the action (EventKey), so it may be
// any text of at most core.MaxSourceLen bytes without control characters.
// An error of fn, and an empty identity, are the message's key errors
// (wrapping ErrMissingKey): the record is not run. A nil fn gives the zero
// Source, which the wrappers refuse.
func KeyFromFunc[E any](name string, fn func(E) (string, error)) Source[E] {
	if fn == nil {
		return Source[E]{}
	}
	if name == "" {
		name = "key function"
	}
	return Source[E]{name: name, get: func(ev E) (string, error) {
		id, err := fn(ev)
		if err != nil && !errors.Is(err, ErrMissingKey) {
			err = fmt.Errorf("%w: %s: %w", ErrMissingKey, name, err)
		}
		return id, err
	}}
}

// KeyFromAll returns the key source whose identity is made of the
// identities of all of sources, in the order given: a composite key, such
// as a tenant attribute and a body field, or an event type and an entity
// id. Each part must be found (the first missing one is the message's key
// error); two events have the same identity only if every part is equal.
// The parts are length-prefixed and hashed (core.DeriveKey), so ("ab","c")
// and ("a","bc") differ and the identity has a fixed length. With no
// sources, or a zero one among them, it is the zero Source, which the
// wrappers refuse.
func KeyFromAll[E any](sources ...Source[E]) Source[E] {
	if len(sources) == 0 {
		return Source[E]{}
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		if s.get == nil {
			return Source[E]{}
		}
		names[i] = s.name
	}
	sources = append([]Source[E](nil), sources...)
	return Source[E]{name: "all of (" + strings.Join(names, ", ") + ")", get: func(ev E) (string, error) {
		parts := make([]string, 0, len(sources)+1)
		parts = append(parts, "all")
		for _, s := range sources {
			id, err := s.EventID(ev)
			if err != nil {
				return "", err
			}
			parts = append(parts, id)
		}
		id, err := core.DeriveKey(parts...)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrMissingKey, err)
		}
		return id, nil
	}}
}

// zeroSourceError is the constructors' error for a zero key source.
func zeroSourceError(kind string, constructors ...string) error {
	return fmt.Errorf("idemlambda: zero %s: use %s, KeyFromFunc or KeyFromAll", kind, strings.Join(constructors, ", "))
}

// The key sources of each event type are Source's instances.
var (
	_ KeySource         = Source[events.SQSMessage]{}
	_ KinesisKeySource  = Source[events.KinesisEventRecord]{}
	_ DynamoDBKeySource = Source[events.DynamoDBEventRecord]{}
)
