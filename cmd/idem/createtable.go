package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemgo/idem/ddbstore"
)

// createTableView is what create-table reports.
type createTableView struct {
	Table      string `json:"table"`
	Created    bool   `json:"created"`
	KeySchema  string `json:"key_schema"`
	TTL        string `json:"ttl_attribute"`
	TTLEnabled bool   `json:"ttl_enabled"`
}

// createTable makes the table a store with the layout flags needs, with
// ddbstore.CreateTable: on demand, the key schema, TTL on the TTL
// attribute; an existing table with that key schema is left as it is.
func (c *cli) createTable(ctx context.Context, args []string) error {
	o := c.flags("create-table", "--table T [--key-attr A] [--ttl-attr A] [--sort-key A --sort-key-value V] [--json]")
	if err := o.parse(args); err != nil {
		return err
	}
	opts, err := o.layout.options()
	if err != nil {
		return err
	}
	client, err := c.dynamoClient(ctx, o)
	if err != nil {
		return err
	}
	info, err := ddbstore.CreateTable(ctx, client, o.table, opts...)
	if err != nil {
		return err
	}
	schema := o.layout.keyAttr + " (partition key, S)"
	if o.layout.sortKey != "" {
		schema += ", " + o.layout.sortKey + " (sort key, S)"
	}
	v := createTableView{Table: o.table, Created: info.Created, KeySchema: schema, TTL: o.layout.ttlAttr, TTLEnabled: info.TTLEnabled}
	if o.json {
		return writeJSON(c.stdout, v)
	}
	var b strings.Builder
	if v.Created {
		fmt.Fprintf(&b, "created table %s (on demand): %s\n", v.Table, v.KeySchema)
	} else {
		fmt.Fprintf(&b, "table %s exists with the store's key schema: %s\n", v.Table, v.KeySchema)
	}
	if v.TTLEnabled {
		fmt.Fprintf(&b, "Time to Live is on, on %s: DynamoDB deletes records some time after their retention ends\n", v.TTL)
	} else {
		fmt.Fprintf(&b, "Time to Live is not on for %s (this server has no TTL API, or TTL is on another attribute): "+
			"records past retention count as absent but are not deleted\n", v.TTL)
	}
	_, err = fmt.Fprint(c.stdout, b.String())
	return err
}
