package blob_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idemgo/idem/blob"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var m blob.Memory // the zero value is ready
	data := []byte("result")
	if err := m.Put(ctx, "a/1", data); err != nil {
		t.Fatal(err)
	}
	data[0] = 'X' // the store kept a copy
	got, err := m.Get(ctx, "a/1")
	if err != nil || string(got) != "result" {
		t.Fatalf("Get = %q, %v; want result", got, err)
	}
	got[0] = 'Y' // and returns a copy
	if again, _ := m.Get(ctx, "a/1"); string(again) != "result" {
		t.Fatalf("Get after editing the returned bytes = %q", again)
	}
	if _, err := m.Get(ctx, "a/2"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get of a missing name: %v, want ErrNotFound", err)
	}
	_ = m.Put(ctx, "a/0", nil)
	if names := m.Names(); !slices.Equal(names, []string{"a/0", "a/1"}) {
		t.Fatalf("Names = %v", names)
	}
	m.Delete("a/1")
	if _, err := m.Get(ctx, "a/1"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Put(canceled, "a/3", data); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a canceled context: %v", err)
	}
	if _, err := m.Get(canceled, "a/0"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v", err)
	}
}

func TestMemoryConcurrent(t *testing.T) {
	t.Parallel()
	m := blob.NewMemory()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("k/%02d", i)
			_ = m.Put(context.Background(), name, []byte(name))
			if got, err := m.Get(context.Background(), name); err != nil || string(got) != name {
				t.Errorf("Get(%s) = %q, %v", name, got, err)
			}
		}()
	}
	wg.Wait()
	if n := len(m.Names()); n != 16 {
		t.Fatalf("%d objects, want 16", n)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	data := []byte("large result")
	sum := blob.Sum(data)
	cases := []struct {
		name string
		data []byte
		sum  string
		ok   bool
	}{
		{"same bytes", data, sum, true},
		{"one byte changed", []byte("large resulT"), sum, false},
		{"cut short", data[:5], sum, false},
		{"empty sum", data, "", false},
		{"uppercase sum", data, fmt.Sprintf("%X", []byte(sum)), false},
	}
	for _, tc := range cases {
		err := blob.Verify(tc.data, tc.sum)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, blob.ErrMismatch)) {
			t.Errorf("%s: Verify = %v, want ok %v (or ErrMismatch)", tc.name, err, tc.ok)
		}
	}
	if len(sum) != 64 {
		t.Errorf("Sum has %d characters, want 64", len(sum))
	}
}

// The recorded SHA-256 finds an object that was replaced.
func ExampleVerify() {
	ctx := context.Background()
	store := blob.NewMemory()
	result := []byte(`{"rows":1000000}`)
	sum := blob.Sum(result) // kept in the record beside the object's name
	_ = store.Put(ctx, "k1/obj", result)

	got, _ := store.Get(ctx, "k1/obj")
	fmt.Println("as written:", blob.Verify(got, sum))

	_ = store.Put(ctx, "k1/obj", []byte(`{"rows":1}`))
	got, _ = store.Get(ctx, "k1/obj")
	fmt.Println("replaced:", errors.Is(blob.Verify(got, sum), blob.ErrMismatch))

	_, err := store.Get(ctx, "k2/obj")
	fmt.Println("missing:", errors.Is(err, blob.ErrNotFound))
	// Output:
	// as written: <nil>
	// replaced: true
	// missing: true
}

func TestMemoryGetLimited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var m blob.Memory
	_ = m.Put(ctx, "a/1", []byte("result"))
	if got, err := m.GetLimited(ctx, "a/1", 6); err != nil || string(got) != "result" {
		t.Fatalf("GetLimited(6) = %q, %v; want result", got, err)
	}
	if _, err := m.GetLimited(ctx, "a/1", 5); !errors.Is(err, blob.ErrMismatch) {
		t.Fatalf("GetLimited(5) of 6 bytes: %v, want ErrMismatch", err)
	}
	if _, err := m.GetLimited(ctx, "a/2", 5); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("GetLimited of a missing name: %v, want ErrNotFound", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.GetLimited(canceled, "a/1", 6); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetLimited with a canceled context: %v", err)
	}
	for _, size := range []int64{-1, 7} {
		if err := blob.TooLarge("a/1", size, 6); !errors.Is(err, blob.ErrMismatch) {
			t.Errorf("TooLarge(%d) = %v, want ErrMismatch", size, err)
		}
	}
}
