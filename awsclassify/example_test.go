package awsclassify_test

import (
	"errors"
	"fmt"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/core"
)

// throttled builds the error a DynamoDB PutItem returns when DynamoDB
// answers HTTP 400 with the code ThrottlingException.
func throttled() error {
	return &smithy.OperationError{
		ServiceID:     "DynamoDB",
		OperationName: "PutItem",
		Err: &awshttp.ResponseError{
			RequestID: "EXAMPLE",
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusBadRequest}},
				Err:      &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput."},
			},
		},
	}
}

func ExampleClassify() {
	err := throttled()
	fmt.Println("awsclassify.Classify:", awsclassify.Classify(err))
	fmt.Println("default chain:", core.Classify(err, core.DefaultClassifiers...))
	fmt.Println("awsclassify.Classifiers:", core.Classify(err, awsclassify.Classifiers...))
	// Output:
	// awsclassify.Classify: transient
	// default chain: permanent
	// awsclassify.Classifiers: transient
}

func ExampleMark() {
	err := awsclassify.Mark(throttled())
	var api smithy.APIError
	fmt.Println(core.Classify(err), errors.As(err, &api) && api.ErrorCode() == "ThrottlingException")

	// An explicit mark is never overridden.
	kept := awsclassify.Mark(core.MarkPermanent(throttled()))
	fmt.Println(core.Classify(kept))
	// Output:
	// transient true
	// permanent
}
