package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
)

// lockMain starts a write transaction of another connection ("another process") on the
// store's projhost.db and returns its rollback.
func lockMain(t *testing.T, s *Store) (rollback func()) {
	t.Helper()
	return lockFile(t, s.Path())
}

// lockFile starts a write transaction of another connection on the database file path and
// returns its rollback (also run when t ends).
func lockFile(t *testing.T, path string) (rollback func()) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	conn, err := other.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	done := false
	rollback = func() {
		if done {
			return
		}
		done = true
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		require.NoError(t, other.Close())
	}
	t.Cleanup(rollback)
	return rollback
}

// TestLeasesWhileAnotherProcessCommits: lease writes do not wait for the write lock of the
// read models (held here by another connection, as a worker in another process committing a
// batch would): a renewal must not depend on commit load.
func TestLeasesWhileAnotherProcessCommits(t *testing.T) {
	s, err := Open(t.TempDir(), WithBusyTimeout(50*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	lockMain(t, s)

	_, err = s.Cursors().Claim(ctx, "p", "s", 1)
	require.ErrorIs(t, err, ErrBusy, "the read models' write lock is held")

	l := shardmap.Lease{Projection: "p", ShardID: "s", State: shardmap.StateActive}
	require.NoError(t, s.Leases().Create(ctx, l))
	l.Owner, l.Epoch = "w1", 1
	for i := range 3 {
		got, err := s.Leases().Update(ctx, l)
		require.NoError(t, err, "renewal %d", i)
		l = got
	}
	ls, err := s.Leases().List(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, []shardmap.Lease{{Projection: "p", ShardID: "s", Owner: "w1", Counter: 3, Epoch: 1, ParentIDs: []string{}, State: shardmap.StateActive}}, ls)
}

// TestLeasesWhileThisProcessCommits: a lease write does not queue behind a commit of this
// process that is waiting for the read models' write lock (here held by another connection).
func TestLeasesWhileThisProcessCommits(t *testing.T) {
	s := openTest(t) // default busy timeout: the commit waits until rollback
	ctx := context.Background()
	l := shardmap.Lease{Projection: "p", ShardID: "s", Owner: "w1", State: shardmap.StateActive}
	require.NoError(t, s.Leases().Create(ctx, l))
	rollback := lockMain(t, s)

	committed := make(chan error, 1)
	go func() {
		committed <- s.ReadModels().Commit(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 0, Seq: "1",
			Mutations: []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"n":1}`)}}})
	}()
	// Wait until the commit holds this process's writer lock of projhost.db.
	for s.wmu.TryLock() {
		s.wmu.Unlock()
		select {
		case err := <-committed:
			t.Fatalf("commit returned while the write lock was held: %v", err)
		default:
		}
		runtime.Gosched()
	}

	got, err := s.Leases().Update(ctx, l)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Counter)
	select {
	case err := <-committed:
		t.Fatalf("the lease update waited for the commit (commit returned first: %v)", err)
	default:
	}
	rollback()
	require.NoError(t, <-committed)
	doc, found, err := s.ReadModels().Get(ctx, "p", "c", "k")
	require.NoError(t, err)
	require.True(t, found)
	require.JSONEq(t, `{"n":1}`, string(doc))
}

// v1Schema is projhost.db as schema version 1 wrote it (leases in the same file).
const v1Schema = `
CREATE TABLE docs (projection TEXT NOT NULL, collection TEXT NOT NULL, key TEXT NOT NULL, doc TEXT NOT NULL,
	shard_id TEXT NOT NULL, seq TEXT NOT NULL, updated_ms INTEGER NOT NULL,
	PRIMARY KEY (projection, collection, key)) WITHOUT ROWID;
CREATE TABLE cursors (projection TEXT NOT NULL, shard_id TEXT NOT NULL, seq TEXT NOT NULL, epoch INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL, PRIMARY KEY (projection, shard_id)) WITHOUT ROWID;
CREATE TABLE leases (projection TEXT NOT NULL, shard_id TEXT NOT NULL, owner TEXT NOT NULL, counter INTEGER NOT NULL,
	epoch INTEGER NOT NULL, parent_ids TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (projection, shard_id)) WITHOUT ROWID;
CREATE TABLE applied (projection TEXT NOT NULL, shard_id TEXT NOT NULL, seq TEXT NOT NULL, epoch INTEGER NOT NULL,
	PRIMARY KEY (projection, shard_id)) WITHOUT ROWID;
INSERT INTO leases VALUES
	('flights', 'shardId-000000000000', 'w1', 41, 3, '[]', 'finished'),
	('flights', 'shardId-000000000001', 'w2', 17, 2, '["shardId-000000000000"]', 'active'),
	('other', 'shardId-000000000000', '', 5, 1, '[]', 'active');
INSERT INTO cursors VALUES ('flights', 'shardId-000000000001', '12345', 2, 1700000000000);
PRAGMA user_version = 1;
`

func execFile(t *testing.T, path, script string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(script)
	require.NoError(t, err)
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	var v int
	require.NoError(t, db.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}

// TestMoveLeasesFromVersion1: Open moves the leases of a version-1 projhost.db to leases.db with
// their counters and epochs (the fencing tokens the cursors were claimed with), replacing rows
// of an interrupted earlier move, and drops the old table; a second Open changes nothing.
func TestMoveLeasesFromVersion1(t *testing.T) {
	dir := t.TempDir()
	execFile(t, filepath.Join(dir, FileName), v1Schema)
	// An earlier move that crashed after writing leases.db but before dropping the old table.
	execFile(t, filepath.Join(dir, LeaseFileName), leaseSchema+`
		INSERT INTO leases VALUES ('flights', 'shardId-000000000001', 'w2', 16, 2, '[]', 'active'),
			('stale', 's', 'x', 1, 1, '[]', 'active');
		PRAGMA user_version = 2;`)
	want := map[string][]shardmap.Lease{
		"flights": {
			{Projection: "flights", ShardID: "shardId-000000000000", Owner: "w1", Counter: 41, Epoch: 3, ParentIDs: []string{}, State: shardmap.StateFinished},
			{Projection: "flights", ShardID: "shardId-000000000001", Owner: "w2", Counter: 17, Epoch: 2,
				ParentIDs: []string{"shardId-000000000000"}, State: shardmap.StateActive},
		},
		"other": {{Projection: "other", ShardID: "shardId-000000000000", Counter: 5, Epoch: 1, ParentIDs: []string{}, State: shardmap.StateActive}},
	}
	ctx := context.Background()
	for round := range 2 {
		s, err := Open(dir)
		require.NoError(t, err, "open %d", round)
		projs, err := s.Leases().Projections(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"flights", "other"}, projs, "open %d", round)
		for p, w := range want {
			got, err := s.Leases().List(ctx, p)
			require.NoError(t, err)
			require.Equal(t, w, got, "open %d: leases of %s", round, p)
		}
		c, err := s.Cursors().Get(ctx, "flights", "shardId-000000000001")
		require.NoError(t, err)
		require.Equal(t, "12345", c.Seq)
		require.Equal(t, int64(2), c.Epoch)
		var n int
		require.NoError(t, s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'leases'`).Scan(&n))
		require.Zero(t, n, "projhost.db keeps no lease table")
		require.NoError(t, s.Close())
		require.Equal(t, SchemaVersion, userVersion(t, filepath.Join(dir, FileName)))
		require.Equal(t, SchemaVersion, userVersion(t, filepath.Join(dir, LeaseFileName)))
	}

	// The moved lease continues where it was: the next conditional write needs counter 17.
	s, err := Open(dir)
	require.NoError(t, err)
	defer s.Close()
	l := want["flights"][1]
	l.Counter = 16
	_, err = s.Leases().Update(ctx, l)
	require.ErrorIs(t, err, shardmap.ErrConflict)
	l.Counter = 17
	got, err := s.Leases().Update(ctx, l)
	require.NoError(t, err)
	require.Equal(t, int64(18), got.Counter)
}

func TestLeaseFileSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	require.NoError(t, err)
	_, err = s.ldb.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Open(dir)
	require.True(t, errors.Is(err, ErrSchema), "Open with a newer leases.db: err = %v, want ErrSchema", err)
	require.Contains(t, err.Error(), LeaseFileName)
}
