package local_test

import (
	"testing"

	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/registrytest"
)

// TestRegistryConformance runs the registry.Store suite on one embedded store per test, and
// on two Stores (two opens of one directory, as two processes) for the races.
func TestRegistryConformance(t *testing.T) {
	t.Run("one open", func(t *testing.T) {
		s, err := local.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		registrytest.RunStore(t, func(t *testing.T) registry.Store { return s.Registry() })
	})
	t.Run("two opens of one directory", func(t *testing.T) {
		dir := t.TempDir()
		var opens []*local.Store
		for range 2 {
			s, err := local.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			opens = append(opens, s)
		}
		n := 0
		registrytest.RunStore(t, func(t *testing.T) registry.Store { n++; return opens[n%2].Registry() })
	})
}
