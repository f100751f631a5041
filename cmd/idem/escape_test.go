package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
)

// Item 7: a record's error text is written by whoever sent the message (a
// handler's error often quotes the payload). inspect and list never put its
// control characters on the operator's terminal: not ESC (CSI, OSC), BEL,
// the C1 controls or the bidirectional overrides, in tables or in JSON.
func TestErrorTextEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:order-1001:ship"
	hostile := "bad order \x1b]0;pwned\x07\x1b[2J\x1b[31mred\u009b0m \u202eevil\u2066 \x00\x7f\xff end"
	f.put(t, key, spec{status: core.StatusFailed, errText: hostile, done: time.Minute})
	for _, args := range [][]string{
		{"inspect", "--table", f.table, "--key", key},
		{"inspect", "--table", f.table, "--key", key, "--json"},
		{"list", "--table", f.table},
		{"list", "--table", f.table, "--json"},
	} {
		out := mustCmd(t, exitOK, t0.Add(time.Hour), nil, args...).stdout
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x202e || r == 0x2066)
		}); i >= 0 {
			t.Errorf("%s: the output has the control %q at %d:\n%q", strings.Join(args, " "), out[i:min(len(out), i+4)], i, out)
		}
		if !strings.Contains(out, "bad order") || !strings.Contains(out, "end") {
			t.Errorf("%s: the error's text is not shown:\n%s", strings.Join(args, " "), out)
		}
	}
}
