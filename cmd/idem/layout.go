package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/idemgo/idem/ddbstore"
)

// keyPlaceholder, in --sort-key-value, stands for the record's key.
const keyPlaceholder = "{key}"

// layoutFlags describe the table's layout as the store's options do: the
// key, sort key and TTL attributes, the key prefix, and renamed attributes.
type layoutFlags struct {
	keyAttr, ttlAttr      string
	sortKey, sortKeyValue string
	keyPrefix             string
	attrs                 attrNames
	homeRegion            string
	windowAccepted        bool
}

func (l *layoutFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.keyAttr, "key-attr", ddbstore.DefaultKeyAttribute, "the table's partition key `attribute` (ddbstore.WithKeyAttribute)")
	fs.StringVar(&l.ttlAttr, "ttl-attr", ddbstore.DefaultTTLAttribute, "the TTL `attribute` (ddbstore.WithTTLAttribute)")
	fs.StringVar(&l.sortKey, "sort-key", "", "the table's sort key `attribute`, for a single-table layout (ddbstore.WithSortKey); needs --sort-key-value")
	fs.StringVar(&l.sortKeyValue, "sort-key-value", "", "the records' sort key `value` (ddbstore.WithSortKey); "+keyPlaceholder+" in it stands for the key, as a WithSortKeyFunc that builds the value so")
	fs.StringVar(&l.keyPrefix, "key-prefix", "", "the store's key `prefix` (ddbstore.WithKeyPrefix): part of the stored key; keys are given without it")
	fs.StringVar(&l.homeRegion, "home-region", "", "on a global table: the `Region` every store call goes to (ddbstore.WithHomeRegion); the table's replica the endpoint reaches must be that Region's")
	fs.BoolVar(&l.windowAccepted, "accept-replication-window", false, "on a global table in eventual consistency: use the replica the endpoint reaches, accepting its replication window (ddbstore.WithReplicationWindowAccepted)")
	l.attrs = attrNames{}
	fs.Var(l.attrs, "attr", "rename an attribute, as `default=name` (ddbstore.WithAttributeNames; repeat for each): status, fingerprint, lease_token, ...")
}

// options returns the store options the flags describe.
func (l *layoutFlags) options() ([]ddbstore.Option, error) {
	opts := []ddbstore.Option{ddbstore.WithKeyAttribute(l.keyAttr), ddbstore.WithTTLAttribute(l.ttlAttr), ddbstore.WithKeyPrefix(l.keyPrefix)}
	switch {
	case l.sortKey == "" && l.sortKeyValue != "":
		return nil, usageErrorf("--sort-key-value needs --sort-key")
	case l.sortKey != "" && l.sortKeyValue == "":
		return nil, usageErrorf("--sort-key needs --sort-key-value")
	case strings.Contains(l.sortKeyValue, keyPlaceholder):
		tmpl := l.sortKeyValue
		opts = append(opts, ddbstore.WithSortKeyFunc(l.sortKey, func(key string) string { return strings.ReplaceAll(tmpl, keyPlaceholder, key) }))
	case l.sortKey != "":
		opts = append(opts, ddbstore.WithSortKey(l.sortKey, l.sortKeyValue))
	}
	if l.homeRegion != "" {
		opts = append(opts, ddbstore.WithHomeRegion(l.homeRegion))
	}
	if l.windowAccepted {
		opts = append(opts, ddbstore.WithReplicationWindowAccepted())
	}
	return append(opts, ddbstore.WithAttributeNames(l.attrs.names())), nil
}

// attrNames is --attr: renamed attributes by their default names.
type attrNames map[string]string

func (a attrNames) String() string {
	parts := make([]string, 0, len(a))
	for def, name := range a {
		parts = append(parts, def+"="+name)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (a attrNames) Set(s string) error {
	def, name, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want default=name, as status=idem_status")
	}
	if !new(ddbstore.AttributeNames).Rename(def, name) {
		return fmt.Errorf("%q is not a record attribute's default name (%s)", def, strings.Join(defaultAttrNames, ", "))
	}
	if _, dup := a[def]; dup {
		return fmt.Errorf("%s renamed twice", def)
	}
	a[def] = name
	return nil
}

// names returns the AttributeNames of the renamings (Set accepts default
// names only).
func (a attrNames) names() ddbstore.AttributeNames {
	var n ddbstore.AttributeNames
	for def, name := range a {
		n.Rename(def, name)
	}
	return n
}

// defaultAttrNames are the record attributes' default names, which --attr
// renames.
var defaultAttrNames = ddbstore.DefaultAttributeNames()
