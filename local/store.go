// Package local is projhost's embedded storage: SQLite database files (pure-Go driver
// modernc.org/sqlite, no cgo) holding leases, cursors, read models and dead letters, so a local
// run needs no setup (DESIGN §5). Several worker processes may open the same directory at once; leases are
// how they coordinate, and SQLite's file locks serialise their writes.
//
// A Store hands out four views of its databases:
//
//   - Leases() implements shardmap.LeaseStore;
//   - Cursors() implements cursorstore.Store;
//   - ReadModels() implements readmodel.Store and readmodel.Committer. Commit applies a batch's
//     mutations and saves the shard's cursor in one transaction, which makes local runs
//     exactly-once (DESIGN §3). With readmodel.Write.Replay set, the same transaction moves the
//     replayed dead letter to deadletter.StateReplayed;
//   - DeadLetters() implements deadletter.Store.
//
// (One type cannot implement both cursorstore.Store and readmodel.Store: their Get methods differ.)
//
// # Database
//
// Read models and cursors are in DIR/projhost.db (FileName), leases in DIR/leases.db
// (LeaseFileName; see "Leases have their own file"). Both are in WAL mode with
// synchronous=NORMAL: a committed transaction survives a process crash; a power loss may drop
// the last transactions but never corrupts a file. Writes use BEGIN IMMEDIATE and wait up to
// the busy timeout (default 5 s, WithBusyTimeout) for another process's write to the same
// file; past that they fail with ErrBusy. OpenReadOnly opens both files read-only (mode=ro,
// query_only) for commands that only read: WAL readers take no write lock, so they answer
// while another process holds it, and they work in a read-only directory.
//
// # Several processes
//
// Processes on one machine may share a directory on a local file system (SQLite's WAL needs
// shared memory: not over NFS or SMB). SQLite lets one process at a time write each file.
// Every write transaction here is a few statements prepared from data computed before it
// begins (no handler call, no network, no sleep inside), so the write lock is held for
// milliseconds; a process holds it longer only when it is paused (SIGSTOP, a debugger, a
// frozen VM) or starved of CPU inside a transaction. While it is, the other processes'
// commits of projhost.db wait the busy timeout and fail with ErrBusy (their callers retry:
// store errors are never charged to an event), and nothing is lost; their lease writes, in
// leases.db, go on, so they keep their leases and take the paused process's after the lease
// duration (their cursor claims then wait for the lock too); Open of a store at the current
// schema takes no lock, so a new process starts too. Killing the paused process frees
// the lock at once (the OS drops its file locks; its unfinished transaction is rolled back).
// The window in which a pause holds leases.db's lock is a lease write's (a fraction of a
// millisecond per renewal round): a process paused there stops every renewal until it
// continues or is killed.
//
// Tables (all but deadletters WITHOUT ROWID; sequence numbers are decimal strings as the source
// returned them):
//
//	docs(projection TEXT, collection TEXT, key TEXT, doc TEXT, shard_id TEXT, seq TEXT, updated_ms INTEGER)
//	    PRIMARY KEY (projection, collection, key). doc is the JSON object text; shard_id and seq
//	    name the write that last changed it; updated_ms is that write's wall-clock time (ms since
//	    the Unix epoch). Deleted documents are removed.
//	cursors(projection TEXT, shard_id TEXT, seq TEXT, epoch INTEGER, updated_ms INTEGER,
//	    stopped TEXT, stopped_ms INTEGER) PRIMARY KEY (projection, shard_id). seq is "" until
//	    something is saved; stopped is "" and stopped_ms 0 unless the shard is stopped
//	    (cursorstore.Cursor.Stopped, StoppedMs).
//	applied(projection TEXT, shard_id TEXT, seq TEXT, epoch INTEGER)
//	    PRIMARY KEY (projection, shard_id): the last sequence number and the highest epoch whose
//	    read-model writes were applied from a shard (the Apply fence).
//	leases(projection TEXT, shard_id TEXT, owner TEXT, counter INTEGER, epoch INTEGER,
//	    parent_ids TEXT, state TEXT, module TEXT) PRIMARY KEY (projection, shard_id), in
//	    leases.db. parent_ids is a JSON array; module is the owner's module identity
//	    (shardmap.Lease.Module), "" when free.
//	deadletters(projection TEXT, shard_id TEXT, seq TEXT, partition_key TEXT, arrival_ms INTEGER,
//	    data BLOB, error_kind TEXT, error TEXT, attempts INTEGER, first_failure_ms INTEGER,
//	    last_failure_ms INTEGER, state TEXT, replayed_seq TEXT) PRIMARY KEY (projection, shard_id,
//	    seq), a rowid table (rows hold whole events). One row per deadletter.Letter: data is the
//	    event's bytes; the failure times are ms since the Unix epoch, NULL when unknown; state is a
//	    deadletter.State; replayed_seq is "" until replayed. Sequence numbers have no leading
//	    zeros, so ORDER BY shard_id, length(seq), seq lists letters in the shard's order.
//	module_versions(projection TEXT, version INTEGER, sha256 TEXT, size INTEGER, abi INTEGER,
//	    uploaded_ms INTEGER, note TEXT) PRIMARY KEY (projection, version): registry.Version.
//	module_active(projection TEXT PRIMARY KEY, version INTEGER, previous INTEGER, counter INTEGER,
//	    changed_ms INTEGER): registry.Active (no row: never activated).
//	module_shards(projection TEXT, shard_id TEXT, epoch INTEGER, version INTEGER, seq TEXT,
//	    changed_ms INTEGER) PRIMARY KEY (projection, shard_id): registry.ShardVersion.
//
// PRAGMA user_version of each file holds the schema version (SchemaVersion). Open upgrades an
// older projhost.db in place, in one transaction: version 1 -> 2 added the cursors' stopped
// columns and the deadletters table; 2 -> 3 moved the leases to leases.db (counters and epochs
// unchanged) and dropped the old table, so an older program still running loses its leases
// (its writes fail) and older ones refuse to start (ErrSchema); 3 -> 4 added leases.module
// (leases.db only), so that no older program writes leases without it; 4 -> 5 added the module
// registry's tables (module_versions, module_active, module_shards). A file of a newer version is refused with
// ErrSchema.
//
// # Leases have their own file
//
// A lease is renewed every 2 s and lost when a renewal has not completed within the lease
// duration (6 s). SQLite has one write lock per file. When leases shared projhost.db with the
// read models, a renewal queued behind read-model commits twice: behind this process's commits
// in Go (wmu), then behind the other processes' commits in SQLite's busy handler, which polls
// (sleeping up to 100 ms) while a process with a backlog of commits hands the lock from one
// commit to the next without a gap. Measured with two workers on 16 shards of 3M events and a
// CPU hog on both cores: commits of ~250 documents held the lock 20 ms (median) but up to
// 1.3 s (the committing goroutine shares the CPU with the handlers); the lease UPDATE itself
// took 0.06 ms, yet waited for wmu 0.5 s (median), 3.4 s (p99), 4.0 s (max), and for the
// SQLite lock up to 1.9 s (a commit up to 3.7 s); renewals then completed after the lease
// duration and runners stopped their shards. Letting lease writes go first in Go still left
// them waiting for the commit in progress and the other process (up to 0.55 s). In a file of
// their own, lease writes wait only for other lease writes (0.1 ms median under the same load),
// whatever the commit load. No transaction spans leases and read models: they meet only
// through epochs (a take raises the epoch; the cursor claim and every commit are fenced by
// it), as in DynamoDB, where they are separate tables.
//
// # Querying read models
//
// Read models are plain rows, so any SQLite client can query them while workers run (WAL readers
// never block writers). With the sqlite3 command-line shell:
//
//	sqlite3 -readonly DIR/projhost.db \
//	  "SELECT key, json_extract(doc, '$.count') AS n FROM docs
//	   WHERE projection = 'flights' AND collection = 'airports'
//	   ORDER BY n DESC LIMIT 10"
//
// json_extract, json_each and the other JSON functions of SQLite apply to doc. Do not write to
// the tables by hand while workers run.
package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/projhost/projhost/internal/sqlitefile"
)

// FileName is the name of the read-model and cursor database inside the directory given to Open.
const FileName = "projhost.db"

// LeaseFileName is the name of the lease database inside the directory given to Open.
const LeaseFileName = "leases.db"

// SchemaVersion is the schema version this package writes (PRAGMA user_version of both files).
const SchemaVersion = 6

// DefaultBusyTimeout is how long a write waits for another process's write lock by default;
// MaxBusyTimeout is the longest busy timeout accepted (ValidateBusyTimeout).
const (
	DefaultBusyTimeout = 5 * time.Second
	MaxBusyTimeout     = sqlitefile.MaxBusyTimeout
)

// ErrBusy is returned when a database file stayed locked by another connection or process for
// longer than the busy timeout. The error wrapping it names the directory.
var ErrBusy = errors.New("local: the embedded store is locked by another process")

// ErrNoStore is returned by OpenReadOnly when the directory holds no embedded store.
var ErrNoStore = errors.New("local: no embedded store")

// ErrInvalid is returned for input the store cannot hold: a sequence number that is not a
// decimal number, an empty collection or key, a document that is not a JSON object.
var ErrInvalid = errors.New("local: invalid input")

// ErrSchema is returned by Open when the database was written by a newer schema version.
var ErrSchema = errors.New("local: database schema is newer than this program; upgrade projhost")

// Option configures Open. Options are immutable values.
type Option func(*options)

type options struct {
	busyTimeout time.Duration
}

// WithBusyTimeout sets how long a statement waits for another process's lock of a file before
// failing with ErrBusy (default DefaultBusyTimeout; SQLite's busy_timeout, in whole
// milliseconds). Open and OpenReadOnly refuse a value ValidateBusyTimeout refuses.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// ValidateBusyTimeout checks a busy timeout: 1 ms to MaxBusyTimeout (ErrInvalid otherwise).
// Open, OpenReadOnly, the journal's Open and the CLI's --busy-timeout all check with it.
func ValidateBusyTimeout(d time.Duration) error {
	if err := sqlitefile.ValidateBusyTimeout(d); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func buildOptions(opts []Option) (options, error) {
	o := options{busyTimeout: DefaultBusyTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ValidateBusyTimeout(o.busyTimeout); err != nil {
		return o, fmt.Errorf("local: %w", err)
	}
	return o, nil
}

// Store is the embedded store. It is safe for concurrent use by many goroutines; other processes
// may use the same file at the same time.
type Store struct {
	db    *sql.DB // FileName: read models and cursors
	ldb   *sql.DB // LeaseFileName: leases
	dir   string
	path  string
	lpath string
	busy  time.Duration
	ro    bool // OpenReadOnly
	// wmu and lmu serialise this process's writers of db and ldb, so they queue in Go instead
	// of in SQLite's busy handler (which polls with sleeps). Other processes are serialised by
	// SQLite's lock of each file. Lease writes never wait for wmu.
	wmu sync.Mutex
	lmu sync.Mutex

	leases     Leases
	cursors    Cursors
	readModels ReadModels
}

// Open opens (creating when missing) the databases DIR/projhost.db and DIR/leases.db, creating
// dir too, and upgrades an older schema. Errors: ErrInvalid (an option's value), ErrSchema,
// ErrBusy, file system and SQLite errors.
func Open(dir string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: create data directory: %w", err)
	}
	s := newStore(dir, o.busyTimeout, false)
	if err := s.openFiles(); err != nil {
		return nil, err
	}
	if err := s.migrate(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// current reports whether both files already have SchemaVersion: then Open needs no write
// transaction, and starts while another process holds a write lock (a paused worker).
func (s *Store) current() bool {
	for _, db := range []*sql.DB{s.db, s.ldb} {
		var v int
		if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
			return false
		}
	}
	return true
}

// OpenReadOnly opens the existing store in dir for reading only: both files read-only
// (SQLite mode=ro and query_only), nothing created, migrated or locked for writing, so it
// answers while another process holds a write lock (WAL readers never wait for writers) and
// works in a read-only directory. Every write through it fails. Errors: ErrNoStore (wrapped
// with what to do) when dir holds no projhost.db; ErrSchema when a file has a newer schema
// version, or an older one (a worker upgrades it: run `projhost run` once); ErrInvalid (an
// option's value); a file system error when a file cannot be read; SQLite errors.
func OpenReadOnly(dir string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	s := newStore(dir, o.busyTimeout, true)
	for _, p := range []string{s.path, s.lpath} {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s (no %s): run a projection there first (projhost run --data %s ...)",
				ErrNoStore, dir, filepath.Base(p), dir)
		}
		if err != nil {
			return nil, fmt.Errorf("local: cannot read the embedded store in %s: %w", dir, err)
		}
		f.Close()
	}
	if err := s.openFiles(); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		db   *sql.DB
		path string
	}{{s.db, s.path}, {s.ldb, s.lpath}} {
		var v int
		if err := f.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			s.Close()
			return nil, fmt.Errorf("local: read the schema version of %s: %w", f.path, s.wrapBusy(err))
		}
		if v != SchemaVersion {
			s.Close()
			if v > SchemaVersion {
				return nil, fmt.Errorf("%w: %s has schema version %d, this program knows %d", ErrSchema, f.path, v, SchemaVersion)
			}
			return nil, fmt.Errorf("%w: %s has the older schema version %d: a worker upgrades it (run projhost run there once)",
				ErrSchema, f.path, v)
		}
	}
	return s, nil
}

func newStore(dir string, busy time.Duration, ro bool) *Store {
	s := &Store{dir: dir, path: filepath.Join(dir, FileName), lpath: filepath.Join(dir, LeaseFileName), busy: busy, ro: ro}
	s.leases.s, s.cursors.s, s.readModels.s = s, s, s
	return s
}

// openFiles opens projhost.db and leases.db (openSQLite).
func (s *Store) openFiles() error {
	var err error
	if s.db, err = s.openSQLite(s.path); err != nil {
		return err
	}
	if s.ldb, err = s.openSQLite(s.lpath); err != nil {
		s.db.Close()
		return err
	}
	return nil
}

// openSQLite opens path with the busy timeout, read-only for OpenReadOnly
// (internal/sqlitefile).
func (s *Store) openSQLite(path string) (*sql.DB, error) {
	db, err := sqlitefile.Open(path, s.busy, s.ro)
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, s.wrapBusy(err))
	}
	db.SetMaxIdleConns(4)
	return db, nil
}

// migrations[i] upgrades a database of schema version i to version i+1; a new database runs
// them all, so every migration is exercised by every test. A released migration is never edited:
// a schema change is a new migration appended here (and SchemaVersion raised).
var migrations = []string{
	// 0 -> 1: the first schema (leases included; 2 -> 3 moves them to leases.db).
	`
CREATE TABLE IF NOT EXISTS docs (
	projection TEXT NOT NULL,
	collection TEXT NOT NULL,
	key        TEXT NOT NULL,
	doc        TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	seq        TEXT NOT NULL,
	updated_ms INTEGER NOT NULL,
	PRIMARY KEY (projection, collection, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cursors (
	projection TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	seq        TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	updated_ms INTEGER NOT NULL,
	PRIMARY KEY (projection, shard_id)
) WITHOUT ROWID;
` + leaseTableDDL + `CREATE TABLE IF NOT EXISTS applied (
	projection TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	seq        TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	PRIMARY KEY (projection, shard_id)
) WITHOUT ROWID;
`,
	// 1 -> 2: stopped shards (cursorstore.Store.Stop) and dead letters (deadletter.Store). A
	// rowid table, unlike the others: its rows hold whole events (up to 1 MiB), and SQLite keeps
	// large rows better in a rowid table than in a WITHOUT ROWID one.
	`
ALTER TABLE cursors ADD COLUMN stopped TEXT NOT NULL DEFAULT '';
ALTER TABLE cursors ADD COLUMN stopped_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE deadletters (
	projection       TEXT NOT NULL,
	shard_id         TEXT NOT NULL,
	seq              TEXT NOT NULL,
	partition_key    TEXT NOT NULL,
	arrival_ms       INTEGER NOT NULL,
	data             BLOB NOT NULL,
	error_kind       TEXT NOT NULL,
	error            TEXT NOT NULL,
	attempts         INTEGER NOT NULL,
	first_failure_ms INTEGER,
	last_failure_ms  INTEGER,
	state            TEXT NOT NULL,
	replayed_seq     TEXT NOT NULL,
	PRIMARY KEY (projection, shard_id, seq)
);
`,
	// 2 -> 3: leases move to leases.db: moveLeases (Go code, not SQL).
	"",
	// 3 -> 4: nothing in projhost.db; leases.db gains the owner's module identity
	// (leaseModuleDDL, in createTables).
	"",
	// 4 -> 5: the module registry (registry.Store: Registry).
	`
CREATE TABLE module_versions (
	projection  TEXT NOT NULL,
	version     INTEGER NOT NULL,
	sha256      TEXT NOT NULL,
	size        INTEGER NOT NULL,
	abi         INTEGER NOT NULL,
	uploaded_ms INTEGER NOT NULL,
	note        TEXT NOT NULL,
	PRIMARY KEY (projection, version)
) WITHOUT ROWID;
CREATE TABLE module_active (
	projection TEXT NOT NULL PRIMARY KEY,
	version    INTEGER NOT NULL,
	previous   INTEGER NOT NULL,
	counter    INTEGER NOT NULL,
	changed_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE module_shards (
	projection TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	version    INTEGER NOT NULL,
	seq        TEXT NOT NULL,
	changed_ms INTEGER NOT NULL,
	PRIMARY KEY (projection, shard_id)
) WITHOUT ROWID;
`,
	// 5 -> 6: paused projections and shards (cursorstore.Store.SetPaused; shard_id '' is the
	// projection as a whole).
	`
CREATE TABLE pauses (
	projection TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	paused_ms  INTEGER NOT NULL,
	PRIMARY KEY (projection, shard_id)
) WITHOUT ROWID;
`,
}

// leaseTableDDL creates the lease table: in projhost.db up to version 2, in leases.db since.
const leaseTableDDL = `
CREATE TABLE IF NOT EXISTS leases (
	projection TEXT NOT NULL,
	shard_id   TEXT NOT NULL,
	owner      TEXT NOT NULL,
	counter    INTEGER NOT NULL,
	epoch      INTEGER NOT NULL,
	parent_ids TEXT NOT NULL,
	state      TEXT NOT NULL,
	PRIMARY KEY (projection, shard_id)
) WITHOUT ROWID;
`

// leaseSchema is the schema of leases.db up to version 3 (its user_version is SchemaVersion
// too); createTables adds leaseModuleDDL to files of an older version.
const leaseSchema = leaseTableDDL

// leaseModuleDDL upgrades leases.db from version 3 to 4: the owner's module identity
// (shardmap.Lease.Module, "" for leases written before).
const leaseModuleDDL = `ALTER TABLE leases ADD COLUMN module TEXT NOT NULL DEFAULT '';`

// leaseModuleVersion is the version of leases.db that added leaseModuleDDL.
const leaseModuleVersion = 4

// movedLeasesVersion is the version whose migration moves the leases to leases.db.
const movedLeasesVersion = 3

// migrate brings projhost.db to SchemaVersion and creates leases.db, moving the leases of an
// older projhost.db there. All of it runs inside projhost.db's write transaction: concurrent
// Opens wait for it, and a migration interrupted by a crash is redone from the start (leases.db
// is used only once the old table is gone). Files already at SchemaVersion need nothing: no
// transaction is begun.
func (s *Store) migrate(ctx context.Context) error {
	if s.current() {
		return nil
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("read the schema version of %s: %w", s.path, err)
		}
		if v > SchemaVersion {
			return fmt.Errorf("%w: %s has schema version %d, this program knows %d", ErrSchema, s.path, v, SchemaVersion)
		}
		for ; v < SchemaVersion; v++ {
			var err error
			if v+1 == movedLeasesVersion {
				err = s.moveLeases(ctx, tx)
			} else if migrations[v] != "" {
				_, err = tx.ExecContext(ctx, migrations[v])
			}
			if err != nil {
				return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return err
		}
		return s.writeLeases(ctx, func(ltx *sql.Tx) error { return createTables(ctx, ltx, s.lpath, leaseSchema) })
	})
}

// moveLeases copies projhost.db's lease table (tx) into leases.db and drops it.
func (s *Store) moveLeases(ctx context.Context, tx *sql.Tx) error {
	old, err := oldLeases(ctx, tx)
	if err != nil || old == nil {
		return err
	}
	err = s.writeLeases(ctx, func(ltx *sql.Tx) error {
		if err := createTables(ctx, ltx, s.lpath, leaseSchema); err != nil {
			return err
		}
		if _, err := ltx.ExecContext(ctx, `DELETE FROM leases`); err != nil {
			return err
		}
		for _, r := range old {
			if _, err := ltx.ExecContext(ctx, `INSERT INTO leases
				(projection, shard_id, owner, counter, epoch, parent_ids, state) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				r...); err != nil {
				return fmt.Errorf("move leases to %s: %w", s.lpath, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE leases`); err != nil {
		return fmt.Errorf("drop the old lease table: %w", err)
	}
	return nil
}

// createTables checks the schema version of leases.db (the file tx writes), creates the tables
// of ddl, upgrades a file older than leaseModuleVersion (a new file too: ddl is the version-3
// table) and sets the version.
func createTables(ctx context.Context, tx *sql.Tx, path, ddl string) error {
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read the schema version of %s: %w", path, err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s has schema version %d, this program knows %d", ErrSchema, path, v, SchemaVersion)
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create the tables of %s: %w", path, err)
	}
	if v < leaseModuleVersion {
		if _, err := tx.ExecContext(ctx, leaseModuleDDL); err != nil {
			return fmt.Errorf("add the module column to %s: %w", path, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return fmt.Errorf("set the schema version of %s: %w", path, err)
	}
	return nil
}

// oldLeases returns the rows of projhost.db's version-1 and -2 table leases as INSERT arguments
// (projection, shard_id, owner, counter, epoch, parent_ids, state), nil when there is no such
// table, non-nil and empty when it is empty.
func oldLeases(ctx context.Context, tx *sql.Tx) ([][]any, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'leases'`).Scan(&n); err != nil {
		return nil, fmt.Errorf("look for the version-1 lease table: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT projection, shard_id, owner, counter, epoch, parent_ids, state FROM leases`)
	if err != nil {
		return nil, fmt.Errorf("read the version-1 lease table: %w", err)
	}
	defer rows.Close()
	out := [][]any{}
	for rows.Next() {
		var projection, shard, owner, parents, state string
		var counter, epoch int64
		if err := rows.Scan(&projection, &shard, &owner, &counter, &epoch, &parents, &state); err != nil {
			return nil, fmt.Errorf("read the version-1 lease table: %w", err)
		}
		out = append(out, []any{projection, shard, owner, counter, epoch, parents, state})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the version-1 lease table: %w", err)
	}
	return out, nil
}

// Path returns the path of the read-model and cursor database (FileName).
func (s *Store) Path() string { return s.path }

// LeasePath returns the path of the lease database (LeaseFileName).
func (s *Store) LeasePath() string { return s.lpath }

// Close closes the databases. Views obtained from the store must not be used afterwards.
func (s *Store) Close() error { return errors.Join(s.db.Close(), s.ldb.Close()) }

// Leases returns the lease store (shardmap.LeaseStore) of this database.
func (s *Store) Leases() *Leases { return &s.leases }

// Cursors returns the cursor store (cursorstore.Store) of this database.
func (s *Store) Cursors() *Cursors { return &s.cursors }

// ReadModels returns the read-model store (readmodel.Store, readmodel.Committer) of this database.
func (s *Store) ReadModels() *ReadModels { return &s.readModels }

// write runs fn in one IMMEDIATE transaction of projhost.db, committing when fn returns nil.
// fn must only run statements: whatever can wait (decoding, validation, a network call) is
// done before, so that the write lock is held for as short a time as the statements take.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, s.db, &s.wmu, fn)
}

// writeLeases is write for leases.db.
func (s *Store) writeLeases(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeTx(ctx, s.ldb, &s.lmu, fn)
}

func (s *Store) writeTx(ctx context.Context, db *sql.DB, mu *sync.Mutex, fn func(tx *sql.Tx) error) error {
	mu.Lock()
	defer mu.Unlock()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrapBusy(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return s.wrapBusy(err)
	}
	return s.wrapBusy(tx.Commit())
}

// wrapBusy turns SQLITE_BUSY into ErrBusy naming the directory and what may hold the lock,
// keeping the driver error in the chain.
func (s *Store) wrapBusy(err error) error {
	if sqlitefile.IsBusy(err) {
		return fmt.Errorf("%w: %s stayed locked for longer than the busy timeout of %s "+
			"(a worker paused or stuck inside a write? it holds the lock until it continues or is killed): %w",
			ErrBusy, s.dir, s.busy, err)
	}
	return err
}

func nowMs() int64 { return time.Now().UnixMilli() }

// validSeq reports whether seq is a non-empty decimal number.
func validSeq(seq string) bool {
	if seq == "" {
		return false
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return false
		}
	}
	return true
}
