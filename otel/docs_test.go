package idemotel_test

import (
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/idemgo/idem"
	idemotel "github.com/idemgo/idem/otel"
)

// docs/observability.md's "Traces" section names every store call the
// runner traces and every attribute of the spans.
func TestTracesDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## Traces")
	if start < 0 {
		t.Fatal(`docs/observability.md has no "## Traces" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	for _, op := range idem.StoreOps() {
		if !strings.Contains(section, "`"+op+"`") {
			t.Errorf("the Traces section does not name the store call %s", op)
		}
	}
	for _, k := range []attribute.Key{idemotel.AttrVerdict, idemotel.AttrKeyHash, idemotel.AttrAttempts, idemotel.AttrTookOver,
		idemotel.AttrCached, idemotel.AttrWaited, idemotel.AttrLeaseLost, idemotel.AttrStoreCalls, idemotel.AttrStoreOp,
		idemotel.AttrConflict, idemotel.AttrNotFound, idemotel.AttrTenant} {
		if !strings.Contains(section, "`"+string(k)+"`") {
			t.Errorf("the Traces section does not name the attribute %s", k)
		}
	}
	for _, name := range []string{"`" + idemotel.CallSpan + "`", "`" + idemotel.StoreSpanPrefix + "<method>`"} {
		if !strings.Contains(section, name) {
			t.Errorf("the Traces section does not name the span %s", name)
		}
	}
}
