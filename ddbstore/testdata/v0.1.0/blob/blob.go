package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Store keeps objects by name. Implementations are safe for concurrent use
// by multiple goroutines.
type Store interface {
	// Put writes data under name, replacing any object of that name. When
	// Put returns nil the object is durably stored and a Get of name returns
	// it. A failed Put may or may not have written the object. Errors an
	// implementation knows to be worth retrying (throttling, a 5xx, a
	// transport failure) should be marked with core.MarkTransient or be
	// errors that awsclassify.Classify reports transient.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the object stored under name, or an error wrapping
	// ErrNotFound if there is none.
	Get(ctx context.Context, name string) ([]byte, error)
}

// Errors of the blob contract, checked with errors.Is.
var (
	// ErrNotFound: no object is stored under the name (never written, or
	// removed, for example by an expiry rule).
	ErrNotFound = errors.New("blob: object not found")
	// ErrMismatch: the object read back is not the one recorded: its size
	// or its SHA-256 differs (it was replaced or damaged).
	ErrMismatch = errors.New("blob: object does not match its recorded SHA-256")
)

// Sum returns the hex SHA-256 of data (64 lowercase hexadecimal digits).
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Verify returns nil if data has the hex SHA-256 sum, and otherwise an error
// wrapping ErrMismatch.
func Verify(data []byte, sum string) error {
	if got := Sum(data); got != sum {
		return fmt.Errorf("%w: %d bytes with SHA-256 %s, want %s", ErrMismatch, len(data), got, sum)
	}
	return nil
}

// Memory is a Store in memory, for tests and examples. The zero value is an
// empty store ready for use; it is safe for concurrent use (one mutex guards
// the map). Put and Get copy the bytes. A Memory must not be copied after
// first use.
type Memory struct {
	mu      sync.Mutex        // guards objects
	objects map[string][]byte // guarded by mu
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Put implements Store.Put. It fails only if ctx is done.
func (m *Memory) Put(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects == nil {
		m.objects = map[string][]byte{}
	}
	m.objects[name] = bytes.Clone(data)
	return nil
}

// Get implements Store.Get.
func (m *Memory) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[name]
	if !ok {
		return nil, fmt.Errorf("blob: get %q: %w", name, ErrNotFound)
	}
	return bytes.Clone(data), nil
}

// Delete removes the object stored under name, if any.
func (m *Memory) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, name)
}

// Names returns the names of the stored objects, sorted.
func (m *Memory) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.objects))
	for name := range m.objects {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
