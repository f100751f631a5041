package linz_test

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/internal/linz"
	"github.com/idemgo/idem/memstore"
)

// recorder is a rapid.TB that records a failure instead of failing the
// test, so that a test can check that rapid finds one. Safe for
// concurrent use (mu guards every field).
type recorder struct {
	name string

	mu     sync.Mutex
	failed bool
	out    strings.Builder
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}
func (r *recorder) Log(args ...any)                  { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                 { r.Log(args...); runtime.Goexit() }
func (r *recorder) SkipNow()                         { runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) {
	r.Fail()
	r.Logf(format, args...)
}
func (r *recorder) Error(args ...any)                 { r.Fail(); r.Log(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// TestModelFindsMutants runs the stateful test on each mutant of memstore
// and checks that rapid finds it differs from the model (without writing
// a fail file), and on memstore itself, which must pass.
func TestModelFindsMutants(t *testing.T) {
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := flag.Set("rapid.nofailfile", "false"); err != nil {
			t.Error(err)
		}
	}()
	cases := []struct {
		name     string
		target   *linz.Target
		wantFail bool
	}{
		{"memstore", &linz.Target{Name: "memstore", Store: memstore.New()}, false}, // memstore's own TestModel runs more
		{"get ignores retention", &linz.Target{Name: "mutant", Store: getIgnoresRetention{memstore.New()}}, true},
		{"complete unfenced", &linz.Target{Name: "mutant", Store: completeUnfenced{memstore.New()}}, true},
		{"release unfenced", &linz.Target{Name: "mutant", Store: releaseUnfenced{memstore.New()}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{name: "mutant"}
			done := make(chan struct{})
			go func() {
				defer close(done)
				linz.RunModel(r, tc.target, 30)
			}()
			<-done
			if r.Failed() != tc.wantFail {
				t.Fatalf("rapid failed: %v, want %v; its output:\n%s", r.Failed(), tc.wantFail, r.out.String())
			}
			if tc.wantFail && !strings.Contains(r.out.String(), "differs from the model") {
				t.Errorf("rapid's failure does not show the difference:\n%s", r.out.String())
			}
		})
	}
}
