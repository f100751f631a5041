package ddbstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/ddbstore"
)

// A result too large for a DynamoDB item even compressed (here 500 KB of
// noise) is kept in a blob store, and a duplicate replays it whole. In
// production the blob store is s3blob's, on an S3 bucket with a lifecycle
// rule; here blob.Memory stands in for it, over a table kept in memory.
func ExampleWithLargeResults() {
	blobs := blob.NewMemory()
	store, err := ddbstore.New(newMemTable(), "reports-idem", ddbstore.WithLargeResults(blobs))
	if err != nil {
		log.Fatal(err)
	}
	runner, err := idem.New(store)
	if err != nil {
		log.Fatal(err)
	}
	report := make([]byte, 500<<10)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(report) // noise that does not compress
	renders := 0
	render := func(context.Context) ([]byte, error) {
		renders++
		return report, nil
	}
	for delivery := 1; delivery <= 2; delivery++ {
		out, err := runner.Do(context.Background(), "evt:report-7:render", []byte(`{"report":7}`), render)
		fmt.Printf("delivery %d: %v, %d bytes, same bytes %v, omitted %v, err %v\n",
			delivery, out.Verdict, len(out.Result), bytes.Equal(out.Result, report), out.ResultOmitted, err)
	}
	fmt.Println("renders:", renders, "objects:", len(blobs.Names()))
	// Output:
	// delivery 1: executed, 512000 bytes, same bytes true, omitted false, err <nil>
	// delivery 2: replayed, 512000 bytes, same bytes true, omitted false, err <nil>
	// renders: 1 objects: 1
}
