package local

import (
	"context"
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

// replayFeature declares the embedded store's dead-letter replays: they apply to letters in
// deadletter.StateReplayRequested, so Request puts one there.
var replayFeature = readmodeltest.Replay{
	Request: func(t *testing.T, rm readmodel.Store, projection, shardID, seq string) {
		t.Helper()
		requestReplay(t, rm.(*ReadModels).s, projection, shardID, seq)
	},
}

// requestReplay stores a failed dead letter and requests its replay.
func requestReplay(t *testing.T, s *Store, projection, shardID, seq string) {
	t.Helper()
	ctx := context.Background()
	dl := s.DeadLetters()
	l := deadletter.Letter{Projection: projection, ShardID: shardID, Seq: seq, Data: []byte(`{}`), State: deadletter.StateFailed}
	if err := dl.Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := dl.Transition(ctx, projection, shardID, seq, []deadletter.State{deadletter.StateFailed}, deadletter.StateReplayRequested, ""); err != nil {
		t.Fatal(err)
	}
}

func TestReadModelConformance(t *testing.T) {
	readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return openTest(t).ReadModels() }, replayFeature)
	readmodeltest.RunCommitter(t, func(t *testing.T) (readmodel.Store, cursorstore.Store) {
		s := openTest(t)
		return s.ReadModels(), s.Cursors()
	}, replayFeature)
}

// TestSharedStore runs the suites against one database shared by all subtests, as a DynamoDB
// table would be.
func TestSharedStore(t *testing.T) {
	s := openTest(t)
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return s.Leases() })
	cursortest.Run(t, func(t *testing.T) cursorstore.Store { return s.Cursors() })
	readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return s.ReadModels() }, replayFeature)
	deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return s.DeadLetters() })
}

func TestDeadLetterConformance(t *testing.T) {
	deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return openTest(t).DeadLetters() })
}
