package httpidem_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The middleware is for services outside Lambda: it must not pull in
// aws-lambda-go or the AWS SDK.
func TestNoAWSDependencies(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/idemgo/idem/httpidem").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %v", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/aws/") {
			t.Errorf("httpidem depends on %s", d)
		}
	}
}
