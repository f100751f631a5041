package ddbstore

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// ItemKey is the primary key of the item of key, for the tests of package
// ddbstore_test that rewrite items.
func (s *Store) ItemKey(key string) map[string]types.AttributeValue { return s.keyOf(key) }

// AttemptsCarriedAttr is the name of the store's AttrAttemptsCarried.
func (s *Store) AttemptsCarriedAttr() string { return s.names.AttemptsCarried }
