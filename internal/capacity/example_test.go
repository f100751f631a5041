package capacity_test

import (
	"fmt"

	"github.com/idemgo/idem/internal/capacity"
)

// A ledger charges a completion that replaces a reservation, then a
// duplicate's reservation that the completed item refuses: both are billed
// on the completed item, 1.5 KB, so 2 write units each.
func ExampleLedger() {
	l := capacity.NewLedger()
	l.Learn("idem", "pk", "")
	reserve := `{"TableName":"idem","Item":{"pk":{"S":"evt:1:charge"},"status":{"S":"in_progress"}},"ConditionExpression":"attribute_not_exists(pk)"}`
	complete := `{"TableName":"idem","Item":{"pk":{"S":"evt:1:charge"},"status":{"S":"succeeded"},"result":{"S":"` + fmt.Sprintf("%01500d", 0) + `"}}}`
	refused := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}`
	for _, step := range []struct{ req, resp string }{{reserve, `{}`}, {complete, `{}`}, {reserve, refused}} {
		status := 200
		if step.resp == refused {
			status = 400
		}
		c, err := l.Charge("PutItem", []byte(step.req), []byte(step.resp), status)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%g write units, condition failed: %v\n", c.Write, c.ConditionFailed)
	}
	fmt.Println(capacity.WriteUnits(1500), capacity.ReadUnits(1500, false))
	// Output:
	// 1 write units, condition failed: false
	// 2 write units, condition failed: false
	// 2 write units, condition failed: true
	// 2 0.5
}
