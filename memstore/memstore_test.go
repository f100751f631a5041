package memstore_test

import (
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idem.Store { return memstore.New() })
}

func TestConformanceSharedStore(t *testing.T) {
	s := memstore.New()
	storetest.Run(t, func(t *testing.T) idem.Store { return s })
}
