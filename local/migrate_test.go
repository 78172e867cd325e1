package local

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/readmodel"
)

// openV1 creates a database of schema version 1 in dir, as projhost with SchemaVersion 1 left
// it, with one cursor, one document and one applied row.
func openV1(t *testing.T, dir string) {
	t.Helper()
	db, err := newStore(dir, DefaultBusyTimeout, false).openSQLite(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		migrations[0],
		`INSERT INTO cursors (projection, shard_id, seq, epoch, updated_ms) VALUES ('p', 's', '42', 3, 1)`,
		`INSERT INTO docs (projection, collection, key, doc, shard_id, seq, updated_ms) VALUES ('p', 'c', 'k', '{"n":1}', 's', '42', 1)`,
		`INSERT INTO applied (projection, shard_id, seq, epoch) VALUES ('p', 's', '42', 3)`,
		`PRAGMA user_version = 1`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestMigrateV1 opens a version 1 database: Open upgrades it in place, keeping its rows, and the
// upgraded database works like a new one (and opens again without migrating).
func TestMigrateV1(t *testing.T) {
	dir := t.TempDir()
	openV1(t, dir)
	ctx := context.Background()
	for i := range 2 {
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("Open #%d of a v1 database: %v", i+1, err)
		}
		if v := userVersion(t, s.Path()); v != SchemaVersion {
			t.Fatalf("schema version after Open = %d, want %d", v, SchemaVersion)
		}
		c, err := s.Cursors().Get(ctx, "p", "s")
		if err != nil || c != (cursorstore.Cursor{Projection: "p", ShardID: "s", Seq: "42", Epoch: 3}) {
			t.Fatalf("migrated cursor = %+v, %v; want seq 42 epoch 3, not stopped", c, err)
		}
		doc, ok, err := s.ReadModels().Get(ctx, "p", "c", "k")
		if err != nil || !ok || string(doc) != `{"n":1}` {
			t.Fatalf("migrated document = %s, %v, %v", doc, ok, err)
		}
		l := deadletter.Letter{Projection: "p", ShardID: "s", Seq: "40", Data: []byte{0, 1, 2}, State: deadletter.StateFailed}
		if i == 0 {
			if err := s.Cursors().Stop(ctx, "p", "s", 3, "stopped after the migration"); err != nil {
				t.Fatal(err)
			}
			if err := s.DeadLetters().Put(ctx, l); err != nil {
				t.Fatalf("Put of a dead letter after the migration: %v", err)
			}
			// The applied fence survived: a replay of seq 42 changes nothing.
			w := readmodel.Write{Projection: "p", ShardID: "s", Epoch: 3, Seq: "42",
				Mutations: []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"n":2}`)}}}
			if err := s.ReadModels().Commit(ctx, w); err != nil {
				t.Fatal(err)
			}
			if err := s.Cursors().Resume(ctx, "p", "s"); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.DeadLetters().Get(ctx, "p", "s", "40"); err != nil || !bytes.Equal(got.Data, l.Data) {
			t.Fatalf("dead letter after the migration = %+v, %v", got, err)
		}
		s.Close()
	}
}

// TestMigrateFailureLeavesV1: a migration that fails part-way leaves the database at version 1
// with its rows (the migration is one transaction).
func TestMigrateFailureLeavesV1(t *testing.T) {
	dir := t.TempDir()
	openV1(t, dir)
	// Make the 1 -> 2 migration fail: the column it adds exists already.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ALTER TABLE cursors ADD COLUMN stopped_ms INTEGER NOT NULL DEFAULT 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir); err == nil {
		t.Fatal("Open succeeded although the migration must fail")
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, n int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 1 {
		t.Fatalf("user_version = %d, %v; want 1", v, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('cursors') WHERE name = 'stopped'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("column stopped present (%d, %v) after a failed migration: the migration was not rolled back", n, err)
	}
}
