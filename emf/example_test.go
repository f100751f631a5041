package emf_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/emf"
	"github.com/idemgo/idem/memstore"
)

// Metrics of every call go to standard output, where Lambda ships them to
// CloudWatch.
func Example() {
	e, _ := emf.New(os.Stdout, emf.WithDimension("Service", "orders"),
		emf.WithClock(func() time.Time { return time.UnixMilli(1764763200000) }))
	r, _ := idem.New(memstore.New(), idem.WithObserver(e), idem.WithClock(func() time.Time { return time.UnixMilli(1764763200000) }))
	_, err := r.Do(context.Background(), "evt:order-7:notify", []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`"sent"`), nil })
	fmt.Println(err)
	// Output:
	// {"Calls":1,"Duration":0,"Executions":1,"InProgress":0,"KeyReused":0,"LeaseLost":0,"OutcomesNotRecorded":0,"Replays":0,"Service":"orders","StoreCalls":2,"StoreLatency":0,"Takeovers":0,"Verdict":"executed","_aws":{"CloudWatchMetrics":[{"Dimensions":[["Service","Verdict"]],"Metrics":[{"Name":"Calls","Unit":"Count"},{"Name":"Executions","Unit":"Count"},{"Name":"Replays","Unit":"Count"},{"Name":"InProgress","Unit":"Count"},{"Name":"Takeovers","Unit":"Count"},{"Name":"KeyReused","Unit":"Count"},{"Name":"LeaseLost","Unit":"Count"},{"Name":"OutcomesNotRecorded","Unit":"Count"},{"Name":"StoreCalls","Unit":"Count"},{"Name":"Duration","Unit":"Milliseconds"},{"Name":"StoreLatency","Unit":"Milliseconds"}],"Namespace":"idem"}],"Timestamp":1764763200000},"key_hash":"0f6b3c5a4f0df05d","level":"INFO","timestamp":"2025-12-03T12:00:00.000Z"}
	// <nil>
}
