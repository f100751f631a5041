// Package capacity computes the read and write capacity units DynamoDB charges
// for a request, from the items the request reads and writes, by the rules
// DynamoDB publishes. It is pure: no I/O, no clock. The benchmark's counting
// proxy (cmd/bench) feeds it every request and response it forwards, so that
// each scenario reports capacity units per event beside its call counts.
//
// # Item size
//
// Size counts an item as DynamoDB does (Developer Guide, "Item sizes and
// formats"): for each attribute, the UTF-8 length of its name plus the size of
// its value. A string is its UTF-8 length; a binary value its raw length (not
// its base64 text); a boolean or null 1 byte; a list or map 3 bytes plus, per
// element, 1 byte and the element (a map's element with its name); a set the
// sum of its members. A number is "approximately 1 byte per two significant
// digits, plus 1": exactly, 1 byte plus one per base-100 digit of its
// significant digits aligned on the decimal point, plus 1 for a negative
// number (the model dynalite implements, which agrees with DynamoDB's
// reported figures; see numberSize).
//
// # Units
//
// A write unit covers 1 KB (1024 bytes) of the item, rounded up, at least 1; a
// read unit 4 KB, rounded up, at least 1, and half of it for an eventually
// consistent read; transactional reads and writes cost twice as much
// (Developer Guide, "DynamoDB read and write operations"; the pricing pages'
// "Key terms"). Per operation:
//
//	GetItem            read units of the item (1 unit, or ½, when there is none)
//	PutItem            write units of the larger of the item before and after
//	UpdateItem         write units of the larger of the item before and after the update
//	DeleteItem         write units of the item deleted (1 when there is none)
//	failed condition   the same units as the write would have cost (ConditionalCheckFailedException)
//	BatchWriteItem     each put or delete as above, rounded per item
//	BatchGetItem       each item as a GetItem, rounded per item
//	Query, Scan        read units of the items' total size, rounded once
//	TransactWriteItems twice each action's units (ConditionCheck: the item checked)
//	TransactGetItems   twice the strongly consistent read units of each item
//
// A write whose condition fails is charged: by the AWS guide, "the amount
// consumed is dependent on the size of the item (whether it's an existing item
// in the table or a new one you are attempting to create or update)"; AWS's
// own cost calculator (aws/agent-toolkit-for-aws, calculate_costs.py, its
// rules checked against live ReturnConsumedCapacity) charges the existing
// item's size, or the new item's where there is none. Ledger charges the
// larger of the two, which equals the existing item's whenever that is the
// larger; every failed write the benchmark makes is of that kind (a
// reservation refused by a record at least as large as the one it would
// write). A cancelled transaction is charged as if it had been applied, an
// assumption: AWS publishes no rule for it. Throttled, invalid and unknown
// requests are charged nothing.
//
// # Ledger
//
// A Ledger keeps a shadow of every item written through it, so that it knows
// the item before each write, even one whose condition fails and whose server
// returns nothing (dynalite ignores ReturnValuesOnConditionCheckFailure). Its
// caller must pass it every write to the tables it charges, and serialize the
// requests that touch one item (Keys names them), so that the shadow follows
// the server's order. It applies update expressions itself (SET with
// if_not_exists, list_append, + and -; REMOVE; ADD; DELETE; top-level
// attributes only); a charge it cannot compute exactly is marked Approximate.
//
// Where the server reports ConsumedCapacity, Charge keeps the report beside
// the computed figure (TestAgainstServer compares them for one call of each
// operation). dynalite 4.0.0 reports it for successful PutItem, UpdateItem,
// DeleteItem, GetItem, BatchWriteItem, BatchGetItem and Query, computed by
// these rules to the byte (TestSizeBoundariesAgainstDynalite) but for
// strings, which it counts in UTF-16 code units; nothing for a failed
// condition; TransactWriteItems is an unknown operation there. moto 5.2.5
// reports constants whatever the item (PutItem, DeleteItem, Query and
// BatchWriteItem 1, UpdateItem and GetItem 0.5, BatchGetItem 1 per key), an
// empty list for TransactWriteItems, and nothing for a failed condition: its
// reports are not to be trusted (Tally.Add's trust).
package capacity
