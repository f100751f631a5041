package idemlambda_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// WithEnvelope's documentation names the verdict of a message outside its
// envelope: the one the wrapper gives it.
func TestWithEnvelopeDocNamesItsVerdict(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "envelope.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "WithEnvelope" {
			doc = fn.Doc.Text()
		}
	}
	m := regexp.MustCompile(`\(verdict ([a-z_]+)\)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("WithEnvelope's documentation names no verdict:\n%s", doc)
	}
	var obs observed
	e := newEnv(t, idem.WithObserver(&obs))
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship", idemlambda.KeyFromBodyField("order_id"), h.handle,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	// Raw message delivery: the body is the published message, no envelope.
	_, _ = handle(e.ctx(t, time500s), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m-raw", `{"order_id":"o-1"}`)}})
	if got := verdicts(obs.take()); !slices.Equal(got, []string{m[1]}) {
		t.Errorf("a message outside its envelope: verdicts %v; WithEnvelope's documentation says %s", got, m[1])
	}
}
