package core

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A Selection chooses the part of a JSON payload that its fingerprint
// covers, so that a payload resent with only an ignored part changed (a
// timestamp, a trace header copied into the body, a delivery counter) has
// the fingerprint of the first and replays its outcome instead of being
// refused as a reused key.
//
// A path names object members from the top-level value down, separated by
// dots ("detail.order.id"); a member name that contains a dot cannot be
// named. Where a path reaches an array, the rest of the path applies to
// each element of the array (and of arrays nested in it): "items.sku" names
// the sku of every item. Where a path reaches a value that is neither an
// object nor an array before it ends, that value is covered whole. So a
// payload that is not a JSON object at all (a string, a number, a text
// body) is always covered whole.
//
// SelectFields covers only the members its paths name, each with the
// objects and arrays that lead to it; every other member is left out. A
// named member that is missing from an object the path goes through (in
// every element of an array) is an error wrapping ErrFieldAbsent and
// ErrInvalidPayload: a misspelt path fails at once rather than leaving a
// field unchecked. A member present with null is present.
//
// IgnoreFields covers everything but the members its paths name. A named
// member that is missing is nothing to leave out: no error.
//
// Overlapping paths combine: with SelectFields, "a" covers all of a, so
// "a.b" adds nothing; with IgnoreFields, "a" leaves out all of a. The order
// of the paths does not matter, nor the order of the payload's members.
//
// The whole payload is still read and checked: invalid JSON, a duplicate
// key (also in a member left out) and nesting deeper than MaxDepth are
// errors whatever the selection. Only the fingerprint's input changes: the
// canonical form of the payload with the members left out removed, so two
// payloads whose selected parts are equal have the same fingerprint.
//
// The zero Selection covers the whole payload: its Fingerprint is
// Fingerprint. A Selection is immutable and safe for concurrent use.
type Selection struct {
	nodes []selNode // nodes[0] is the top-level value's; none: the whole payload
	desc  string    // what String says
	err   error     // a bad path given to the constructor
}

// selNode is the part of a selection that applies to one object, reached
// by path. A member whose name is in children goes on with that node (or is
// left out, if the node is drop); a member not in children is covered whole
// if keepOthers, else left out, and then every member in children must be
// present.
type selNode struct {
	children   map[string]int32
	keepOthers bool
	leaf       bool   // a path ends here: its value is covered (or, if drop, left out) whole
	drop       bool   // the member that leads here is left out
	path       string // dotted path to this node, "" at the top
}

// wholeValue is the node of a value covered whole.
const wholeValue int32 = -1

// ErrInvalidSelection is the error, checked with errors.Is, of a Selection
// built from a bad path: empty, or with an empty member name (a leading,
// trailing or doubled dot), or of SelectFields given no path at all.
var ErrInvalidSelection = errors.New("idem: invalid fingerprint selection")

// ErrFieldAbsent is the error, checked with errors.Is, of a payload that
// lacks a member a SelectFields path names. Such an error also wraps
// ErrInvalidPayload.
var ErrFieldAbsent = errors.New("idem: selected field absent")

// absentError reports the selected member path, missing from the object
// that closes at offset.
type absentError struct {
	path   string
	offset int
}

// Is reports whether target is ErrFieldAbsent.
func (e *absentError) Is(target error) bool { return target == ErrFieldAbsent }

func (e *absentError) Error() string {
	return fmt.Sprintf("%v: selected field %q is absent from the object that ends at offset %d", ErrInvalidPayload, e.path, e.offset)
}

func (e *absentError) Unwrap() error { return ErrInvalidPayload }

// SelectFields returns the Selection that covers only the members paths
// name (see Selection). At least one path is needed; a bad path makes
// Err return an error wrapping ErrInvalidSelection, and so do the
// Selection's Fingerprint and Canonicalize.
func SelectFields(paths ...string) Selection {
	if len(paths) == 0 {
		return Selection{err: fmt.Errorf("%w: SelectFields needs at least one path", ErrInvalidSelection)}
	}
	return buildSelection("select", false, paths)
}

// IgnoreFields returns the Selection that covers everything but the members
// paths name (see Selection). With no paths it is the zero Selection. A
// bad path makes Err return an error wrapping ErrInvalidSelection, and so
// do the Selection's Fingerprint and Canonicalize.
func IgnoreFields(paths ...string) Selection {
	if len(paths) == 0 {
		return Selection{}
	}
	return buildSelection("ignore", true, paths)
}

// buildSelection makes the tree of paths: with ignore, leaves are left
// out and every node keeps the members it does not name; else leaves are
// covered whole and nodes keep only the members they name.
func buildSelection(verb string, ignore bool, paths []string) Selection {
	sorted := slices.Clone(paths)
	// Shorter paths first, so that a path under one already covered (or
	// left out) whole is seen to add nothing, whatever the given order.
	slices.SortFunc(sorted, func(a, b string) int { return strings.Count(a, ".") - strings.Count(b, ".") })
	nodes := []selNode{{keepOthers: ignore}}
	for _, p := range sorted {
		parts := strings.Split(p, ".")
		if slices.Contains(parts, "") {
			return Selection{err: fmt.Errorf("%w: path %q has an empty member name", ErrInvalidSelection, p)}
		}
		nodes = addPath(nodes, parts, ignore)
	}
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return Selection{nodes: nodes, desc: verb + " " + strings.Join(sorted, ", ")}
}

// addPath adds one path to the tree. A path under a leaf adds nothing.
func addPath(nodes []selNode, parts []string, ignore bool) []selNode {
	n := int32(0)
	for i, name := range parts {
		if nodes[n].leaf {
			return nodes // under a leaf: already covered, or left out, whole
		}
		child, ok := nodes[n].children[name]
		if !ok {
			child = int32(len(nodes))
			leaf := i == len(parts)-1
			nodes = append(nodes, selNode{keepOthers: ignore, leaf: leaf, drop: ignore && leaf, path: strings.Join(parts[:i+1], ".")})
			if nodes[n].children == nil {
				nodes[n].children = map[string]int32{}
			}
			nodes[n].children[name] = child
		}
		n = child
	}
	return nodes
}

// Under returns the Selection that applies s to the member named member of
// a top-level object and covers every other member whole: the selection of
// a payload wrapped in an object beside other fields, such as an event's
// detail beside its type. Under of the zero Selection is the zero
// Selection.
func (s Selection) Under(member string) Selection {
	if s.err != nil || len(s.nodes) == 0 {
		return s
	}
	nodes := make([]selNode, 0, len(s.nodes)+1)
	nodes = append(nodes, selNode{keepOthers: true, children: map[string]int32{member: 1}})
	for _, n := range s.nodes {
		moved := selNode{keepOthers: n.keepOthers, leaf: n.leaf, drop: n.drop, path: member}
		if n.path != "" {
			moved.path = member + "." + n.path
		}
		if n.children != nil {
			moved.children = make(map[string]int32, len(n.children))
			for k, v := range n.children {
				moved.children[k] = v + 1
			}
		}
		nodes = append(nodes, moved)
	}
	return Selection{nodes: nodes, desc: s.desc + " under " + member}
}

// IsZero reports whether s is the zero Selection, which covers the whole
// payload.
func (s Selection) IsZero() bool { return s.err == nil && len(s.nodes) == 0 }

// Err returns the error of a Selection built from a bad path (wrapping
// ErrInvalidSelection), or nil.
func (s Selection) Err() error { return s.err }

// String describes s, for logs and errors: "select a, b.c", "ignore time",
// or "whole payload".
func (s Selection) String() string {
	switch {
	case s.err != nil:
		return "invalid selection"
	case len(s.nodes) == 0:
		return "whole payload"
	}
	return s.desc
}

// Fingerprint returns the fingerprint of the part of payload that s
// covers: the hex SHA-256 of its canonical form (see Canonicalize). Errors
// are Fingerprint's, a selected member that is absent (ErrFieldAbsent), and
// s's own (ErrInvalidSelection); all but the last wrap ErrInvalidPayload.
// An empty payload has the empty fingerprint, whatever s.
func (s Selection) Fingerprint(payload []byte) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return fingerprint(payload, s.nodes)
}

// Canonicalize returns the canonical form of the part of payload that s
// covers: Canonicalize's form, with the members s leaves out removed.
func (s Selection) Canonicalize(payload []byte) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	return canonicalize(payload, s.nodes)
}

// AppendCanonical appends the canonical form of the part of payload that s
// covers to dst, for a caller that builds a larger canonical document
// around it (see FingerprintCanonical). On an error dst is returned
// unchanged.
func (s Selection) AppendCanonical(dst, payload []byte) ([]byte, error) {
	if s.err != nil {
		return dst, s.err
	}
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	canon, err := c.pooled(payload, s.nodes)
	if err != nil {
		return dst, err
	}
	return append(dst, canon...), nil
}

// FingerprintCanonical returns the fingerprint of a document that is
// already in canonical form (the hex SHA-256 of its bytes), so that
// Fingerprint(p) equals FingerprintCanonical(Canonicalize(p)). It does not
// check that the document is canonical: callers build it from
// AppendCanonical and AppendJSONString.
func FingerprintCanonical(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// AppendJSONString appends s as a JSON string in canonical form, as
// Canonicalize writes strings: no HTML escaping, U+2028 and U+2029 escaped,
// and each byte of invalid UTF-8 written as U+FFFD (as encoding/json
// encodes it). FingerprintCanonical(AppendJSONString(nil, s)) is the
// fingerprint of the JSON encoding of s.
func AppendJSONString[T ~string | ~[]byte](dst []byte, s T) []byte {
	return appendString(dst, s)
}
