package local

import (
	"testing"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/cursorstore/cursortest"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deadletter/deadlettertest"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/readmodel/readmodeltest"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/leasetest"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLeaseConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return openTest(t).Leases() })
}

func TestCursorConformance(t *testing.T) {
	cursortest.Run(t, func(t *testing.T) cursorstore.Store { return openTest(t).Cursors() })
}

func TestReadModelConformance(t *testing.T) {
	readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return openTest(t).ReadModels() })
	readmodeltest.RunCommitter(t, func(t *testing.T) (readmodel.Store, cursorstore.Store) {
		s := openTest(t)
		return s.ReadModels(), s.Cursors()
	})
}

// TestSharedStore runs the suites against one database shared by all subtests, as a DynamoDB
// table would be.
func TestSharedStore(t *testing.T) {
	s := openTest(t)
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return s.Leases() })
	cursortest.Run(t, func(t *testing.T) cursorstore.Store { return s.Cursors() })
	readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return s.ReadModels() })
	deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return s.DeadLetters() })
}

func TestDeadLetterConformance(t *testing.T) {
	deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return openTest(t).DeadLetters() })
}
