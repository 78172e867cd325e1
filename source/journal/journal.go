// Package journal is projhost's local event stream: a durable, sharded, append-only log in one
// SQLite file (DIR/journal.db, pure-Go driver modernc.org/sqlite), separate from the store of
// leases, cursors and read models so that appends never contend with read-model commits.
//
// It behaves like a Kinesis stream (DESIGN §5), resharding included:
//
//   - Create makes a journal of n shards with ids "shardId-000000000000", "shardId-000000000001",
//     ... (Kinesis' format: 12 decimal digits) over evenly split hash key ranges, as Kinesis
//     CreateStream does.
//   - Append puts each event on the open shard whose hash key range holds the MD5 of its
//     partition key (Kinesis' rule), so a key lands on the same shard in both sources.
//   - Split and Merge (Kinesis SplitShard and MergeShards) close their parents and create
//     children with the next ids over the parents' hash key ranges; a closed shard reads to its
//     end and then returns source.ErrShardEnded; Shards lists parents before children.
//   - Within a shard, sequence numbers are consecutive decimal strings: 1, 2, 3, ... on the
//     shards Create made; a child's start after the largest last sequence number of its parents,
//     so a key's sequence numbers increase from parent to child too. ArrivalMs is the append
//     time in ms since the Unix epoch.
//   - *Journal implements source.Source; readers poll the file while they wait for new events.
//     A read is one SQL statement: the shard's head and closed flag with its chunks after the
//     reader's position; a reader keeps the rest of the last chunk it read for its next read.
//
// Several processes may append and read the same journal at once. Each transaction is atomic
// and durable against a process crash (WAL mode, synchronous=NORMAL; a power loss may drop the
// last transactions, never tear one). A split or merge is one transaction too: an append that
// runs at the same time, in any process, lands either before it on the parent or after it on a
// child.
//
// # Tables
//
//	meta(key TEXT PRIMARY KEY, value TEXT)  -- "shards": the shard count Create made (moved to
//	    "created_shards" by the first split or merge, and "shards" set to a text that a
//	    projhost without resharding refuses to open, so that it cannot append to closed shards);
//	    "version": the schema version (3); "generation": the number of splits and merges
//	heads(shard INTEGER PRIMARY KEY, seq INTEGER) -- last sequence number of each shard (its
//	    shards.base when empty)
//	shards(shard INTEGER PRIMARY KEY, parents TEXT, hash_start TEXT, hash_end TEXT,
//	    closed INTEGER, base INTEGER) -- parents: comma-separated indexes ("" for none); the
//	    inclusive hash key range in decimal; closed 0/1; base: the sequence number before the
//	    shard's first one
//	chunks(id INTEGER PRIMARY KEY, shard INTEGER, first_seq INTEGER, last_seq INTEGER,
//	    arrival_ms INTEGER, events BLOB) -- consecutive events first_seq..last_seq of a shard
//	    appended in one transaction (so at one arrival_ms), encoded as chunk.go says, at most
//	    about ChunkBytes; UNIQUE INDEX chunks_by_seq (shard, last_seq)
//
// In every table, shard is the index i of shardId-i. An append transaction writes a row per
// shard it touches (per ChunkBytes), not a row per event: SQLite's cost is per row and page.
//
// A journal of an older schema is upgraded in place, in one transaction, the first time a
// process opens it writable: version 1 (before resharding) gets the shards table, and the
// events table of versions 1 and 2 (a row per event) becomes chunks. Opened read-only, it reads
// as the journal it is.
package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/projhost/projhost/internal/sqlitefile"
	"github.com/projhost/projhost/source"
)

// FileName is the journal's file name inside its directory.
const FileName = "journal.db"

// Limits. Sources: Amazon Kinesis Data Streams quotas (partition keys of 1 to 256 Unicode
// characters, records of at most 1 MiB); MaxShards is projhost's own bound.
const (
	MaxShards          = 10000
	MaxPartitionKeyLen = 256     // Unicode characters
	MaxDataLen         = 1 << 20 // bytes
	// TxEvents is how many events one append transaction holds at most (ValidateAppendBatch's
	// maximum). A transaction's cost is mostly per shard it touches, so larger ones are
	// cheaper per event: `journal append` of flights-3m at 100 shards takes 1.6 µs of CPU per
	// event in transactions of 10,000, 4.6 µs in transactions of 1,000 (RATIONALE.md).
	TxEvents = 10000
	// DefaultReadMax is the batch size Read uses when asked for max <= 0; MaxRead bounds max
	// (Kinesis GetRecords' limit).
	DefaultReadMax = 1000
	MaxRead        = 10000
	// DefaultReadBytes bounds the event data bytes of one Read (and of ReadBytes asked for
	// maxBytes <= 0): projhost's per-handler-call budget (projection.DefaultMaxBatchBytes).
	// Kinesis GetRecords returns at most 10 MiB per call.
	DefaultReadBytes = 4 << 20
)

// Defaults of the options.
const (
	DefaultPollInterval = 20 * time.Millisecond
	DefaultBusyTimeout  = 5 * time.Second
)

var (
	// ErrShardCount is returned by Create when the journal exists with another shard count.
	ErrShardCount = errors.New("journal: the journal exists with a different shard count (use the existing count, or a new directory)")
	// ErrInvalid is returned for an event or sequence number the journal cannot take.
	ErrInvalid = errors.New("journal: invalid input")
	// ErrBeyondHead is returned by Open when the position to read after is beyond the shard's
	// last event: the cursor belongs to another journal (the directory was recreated?) or the
	// journal lost its last transactions in a power failure. Reset the cursor deliberately.
	ErrBeyondHead = errors.New("journal: position is beyond the shard's last event")
	// ErrBusy is returned when another process held the write lock longer than the busy timeout
	// (an appender or worker paused or stuck inside a write holds it until it continues or is
	// killed).
	ErrBusy = errors.New("journal: the journal is locked by another process")
	// ErrShardClosed is returned by Split and Merge for a shard that is already closed (split
	// or merged before): reshard its children instead.
	ErrShardClosed = errors.New("journal: shard is closed (split or merged before; reshard its children)")
	// ErrNotAdjacent is returned by Merge for shards whose hash key ranges do not touch
	// (Kinesis MergeShards' rule).
	ErrNotAdjacent = errors.New("journal: shards are not adjacent (merge two open shards whose hash key ranges touch)")
)

// AppendEvent is one event to append.
type AppendEvent struct {
	PartitionKey string // 1 to 256 Unicode characters; decides the shard
	Data         []byte // at most 1 MiB
}

// Position is where Append put an event.
type Position struct {
	ShardID string
	Seq     string
}

// Option configures Create and Open. Options are immutable values.
type Option func(*options)

type options struct {
	poll, busy time.Duration
	ro         bool
}

// WithPollInterval sets how often a waiting Read looks for new events (default 20 ms; at least
// 1 ms).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) { o.poll = max(d, time.Millisecond) }
}

// WithBusyTimeout sets how long a write waits for another process's write lock before failing
// with ErrBusy (default 5 s; 1 ms to 1 h, else Create and Open fail with ErrInvalid).
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busy = d }
}

// Journal is an open journal. It is safe for concurrent use; other processes may use the same
// file at once.
type Journal struct {
	db       *sql.DB
	path     string
	shards   int // the count Create made
	ro       bool
	poll     time.Duration
	busy     time.Duration
	version  int        // the schema version: below schemaVersion only when read-only
	wmu      sync.Mutex // serialises this process's appends (other processes: SQLite's lock)
	w        appendState
	readStmt *sql.Stmt // a shard's chunks (events, before version 3) after a sequence number
	headStmt *sql.Stmt

	appendHead, appendChunk, appendSetHead *sql.Stmt // nil when read-only

	lmu sync.Mutex
	lay *layout // the last shard layout loaded
}

// ShardID returns the id of shard i: "shardId-" and i in 12 digits.
func ShardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// parseShardID returns i for ShardID(i), or ok=false.
func parseShardID(id string) (int, bool) {
	const prefix = "shardId-"
	if len(id) != len(prefix)+12 || id[:len(prefix)] != prefix {
		return 0, false
	}
	i := 0
	for _, c := range []byte(id[len(prefix):]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}

// ShardFor returns the index of the shard, among shards evenly split shards, that holds
// partitionKey: the MD5 of its bytes as a big-endian 128-bit number, over the hash key range
// [0, 2^128-1] split as Kinesis splits a new stream (source.EvenHashKeyRange). That is the
// shard Append picks on a journal that was never split or merged. It panics unless shards > 0.
func ShardFor(partitionKey string, shards int) int {
	return source.EvenShardForKey(partitionKey, shards)
}

// Create opens the journal in dir, creating dir and the journal with the given shard count when
// missing. Errors: ErrShardCount when it exists with another count; ErrInvalid for a count
// outside 1..MaxShards; ErrBusy; file system and SQLite errors.
func Create(dir string, shards int, opts ...Option) (*Journal, error) {
	if shards < 1 || shards > MaxShards {
		return nil, fmt.Errorf("journal: create with %d shards: need 1 to %d: %w", shards, MaxShards, ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: create directory: %w", err)
	}
	return open(dir, shards, opts)
}

// Open opens the existing journal in dir. Errors: one wrapping fs.ErrNotExist when there is no
// journal; ErrBusy; SQLite errors.
func Open(dir string, opts ...Option) (*Journal, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("journal: no journal in %s (create one first): %w", dir, err)
	}
	return open(dir, 0, opts)
}

// OpenReadOnly opens the existing journal in dir for reading only (SQLite mode=ro and
// query_only): it takes no write lock, so it answers while another process appends or holds
// the lock, and works in a read-only directory; Append fails. Errors as for Open.
func OpenReadOnly(dir string, opts ...Option) (*Journal, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("journal: no journal in %s (create one first): %w", dir, err)
	}
	return open(dir, 0, append(opts, func(o *options) { o.ro = true }))
}

// open opens dir's journal; shards > 0 creates it when missing.
func open(dir string, shards int, opts []Option) (*Journal, error) {
	o := options{poll: DefaultPollInterval, busy: DefaultBusyTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := sqlitefile.ValidateBusyTimeout(o.busy); err != nil {
		return nil, fmt.Errorf("journal: %w: %w", ErrInvalid, err)
	}
	path := filepath.Join(dir, FileName)
	if shards == 0 {
		// A clear error for a file this process cannot read (SQLite says only "unable to open
		// database file").
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("journal: cannot read %s: %w", path, err)
		}
		f.Close()
	}
	db, err := sqlitefile.Open(path, o.busy, o.ro)
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, wrapBusy(err, path, o.busy))
	}
	db.SetMaxIdleConns(8)
	j := &Journal{db: db, path: path, poll: o.poll, busy: o.busy, ro: o.ro, version: schemaVersion}
	if err := j.init(shards); err != nil {
		db.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, wrapBusy(err, path, o.busy))
	}
	if o.ro {
		if err := j.checkVersion(); err != nil {
			db.Close()
			return nil, fmt.Errorf("journal: open %s: %w", path, err)
		}
	} else if err := j.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("journal: open %s: upgrade to schema version %d: %w", path, schemaVersion, wrapBusy(err, path, o.busy))
	}
	if err := j.prepare(); err != nil {
		j.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	return j, nil
}

// prepare prepares the statements that reads and appends run again and again.
func (j *Journal) prepare() error {
	headQuery := `SELECT h.seq, s.closed, s.base FROM heads h JOIN shards s ON s.shard = h.shard WHERE h.shard = ?`
	if j.version == 1 {
		headQuery = `SELECT seq, 0, 0 FROM heads WHERE shard = ?`
	}
	// A read: the shard's head and closed flag, with its chunks after a sequence number (NULLs
	// when there are none), in one statement (one snapshot).
	readQuery := `SELECT h.seq, s.closed, c.first_seq, c.last_seq, c.arrival_ms, c.events
		FROM heads h JOIN shards s ON s.shard = h.shard
		LEFT JOIN chunks c ON c.shard = h.shard AND c.last_seq > ?2
		WHERE h.shard = ?1 ORDER BY c.last_seq LIMIT ?3`
	switch j.version {
	case 1:
		readQuery = `SELECT h.seq, 0, e.seq, e.seq, e.arrival_ms, e.partition_key, e.data
			FROM heads h LEFT JOIN events e ON e.shard = h.shard AND e.seq > ?2
			WHERE h.shard = ?1 ORDER BY e.seq LIMIT ?3`
	case 2:
		readQuery = `SELECT h.seq, s.closed, e.seq, e.seq, e.arrival_ms, e.partition_key, e.data
			FROM heads h JOIN shards s ON s.shard = h.shard
			LEFT JOIN events e ON e.shard = h.shard AND e.seq > ?2
			WHERE h.shard = ?1 ORDER BY e.seq LIMIT ?3`
	}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&j.readStmt, readQuery},
		{&j.headStmt, headQuery},
	} {
		var err error
		if *p.st, err = j.db.Prepare(p.q); err != nil {
			return err
		}
	}
	if j.ro {
		return nil
	}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&j.appendHead, `SELECT seq FROM heads WHERE shard = ?`},
		{&j.appendChunk, `INSERT INTO chunks (shard, first_seq, last_seq, arrival_ms, events) VALUES (?, ?, ?, ?, ?)`},
		{&j.appendSetHead, `UPDATE heads SET seq = ? WHERE shard = ?`},
	} {
		var err error
		if *p.st, err = j.db.Prepare(p.q); err != nil {
			return err
		}
	}
	return nil
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS heads (shard INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shards (
	shard      INTEGER PRIMARY KEY,
	parents    TEXT NOT NULL,
	hash_start TEXT NOT NULL,
	hash_end   TEXT NOT NULL,
	closed     INTEGER NOT NULL,
	base       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
	id         INTEGER PRIMARY KEY,
	shard      INTEGER NOT NULL,
	first_seq  INTEGER NOT NULL,
	last_seq   INTEGER NOT NULL,
	arrival_ms INTEGER NOT NULL,
	events     BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_by_seq ON chunks (shard, last_seq);
`

// init creates the tables when create > 0 and reads the shard count.
func (j *Journal) init(create int) error {
	ctx := context.Background()
	if create == 0 {
		v, err := readCount(ctx, j.db)
		switch {
		case sqlitefile.IsError(err): // no such table
			return fmt.Errorf("not a journal (no shard count): %w", err)
		case errors.Is(err, sql.ErrNoRows):
			return errors.New("not a journal (no shard count)")
		case err != nil:
			return fmt.Errorf("cannot read it (is the directory or the file's -wal or -shm companion writable? is the disk full?): %w", err)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxShards {
			return fmt.Errorf("corrupt shard count %q", v)
		}
		j.shards = n
		return nil
	}
	return j.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return err
		}
		v, err := readCount(ctx, tx)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('shards', ?), ('version', ?)`,
				strconv.Itoa(create), strconv.Itoa(schemaVersion)); err != nil {
				return err
			}
			for i := 0; i < create; i++ {
				if _, err := tx.ExecContext(ctx, `INSERT INTO heads (shard, seq) VALUES (?, 0)`, i); err != nil {
					return err
				}
			}
			if err := insertEvenShards(ctx, tx, create); err != nil {
				return err
			}
		case err != nil:
			return err
		case v != strconv.Itoa(create):
			return fmt.Errorf("it has %s shards, not %d: %w", v, create, ErrShardCount)
		}
		j.shards = create
		return nil
	})
}

// readCount reads the shard count Create made: meta "created_shards" once the journal was
// resharded (reshard moves it there), else "shards".
func readCount(ctx context.Context, q querier) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'created_shards'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		err = q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'shards'`).Scan(&v)
	}
	return v, err
}

// Path returns the journal file's path.
func (j *Journal) Path() string { return j.path }

// ShardCount returns the number of shards Create made (splits and merges add shards: Shards
// lists them all).
func (j *Journal) ShardCount() int { return j.shards }

// Close closes the journal; readers opened from it stop working.
func (j *Journal) Close() error {
	for _, st := range []*sql.Stmt{j.readStmt, j.headStmt, j.appendHead, j.appendChunk, j.appendSetHead} {
		if st != nil {
			st.Close()
		}
	}
	return j.db.Close()
}

// ValidateAppendBatch checks the number of events a caller gathers for one Append call that
// is one transaction: 1 to TxEvents (ErrInvalid otherwise). `projhost journal append --batch`
// checks with it.
func ValidateAppendBatch(n int) error {
	if n < 1 || n > TxEvents {
		return fmt.Errorf("%w: %d events per append transaction: use 1 to %d", ErrInvalid, n, TxEvents)
	}
	return nil
}

// Append appends events, each to the open shard whose hash key range holds the MD5 of its
// partition key (ShardFor's shard until the journal is split or merged), in order, and returns
// their positions.
// Events go in transactions of at most TxEvents: a call of up to TxEvents events is atomic, a
// larger one may, if it fails or the process dies, leave a prefix of whole transactions appended
// (the positions returned with the error say which). Events of one partition key keep their
// order. The Data are copied: the caller may reuse them once Append returns. Errors:
// ErrInvalid (checked before anything is written), ErrBusy, context and SQLite errors.
func (j *Journal) Append(ctx context.Context, events []AppendEvent) ([]Position, error) {
	hashes := make([]hashKey, len(events))
	// Keys repeat: MD5 once per distinct key (of the first 1024 met).
	known := make(map[string]hashKey, min(len(events), 64))
	for i, e := range events {
		// Counted in characters, as Kinesis does (not bytes): at most 4 UTF-8 bytes each, so
		// the ABI (wasmabi.MaxKeyLen, 1024 bytes) carries every key accepted here.
		if n := utf8.RuneCountInString(e.PartitionKey); n == 0 || n > MaxPartitionKeyLen {
			return nil, fmt.Errorf("journal: append: event %d: partition key of %d characters: it must have 1 to %d characters (the Kinesis limit): %w",
				i, n, MaxPartitionKeyLen, ErrInvalid)
		}
		if len(e.Data) > MaxDataLen {
			return nil, fmt.Errorf("journal: append: event %d: data of %d bytes exceeds %d: %w",
				i, len(e.Data), MaxDataLen, ErrInvalid)
		}
		h, ok := known[e.PartitionKey]
		if !ok {
			h = hashOf(e.PartitionKey)
			if len(known) < 1024 {
				known[e.PartitionKey] = h
			}
		}
		hashes[i] = h
	}
	out := make([]Position, 0, len(events))
	for start := 0; start < len(events); start += TxEvents {
		end := min(start+TxEvents, len(events))
		var err error
		out, err = j.appendTx(ctx, events[start:end], hashes[start:end], out)
		if err != nil {
			return out, fmt.Errorf("journal: append: %w", wrapBusy(err, j.path, j.busy))
		}
	}
	return out, nil
}

// appendTx appends events in one transaction and appends their positions to out: each shard's
// events in chunks of about ChunkBytes, one row each.
func (j *Journal) appendTx(ctx context.Context, events []AppendEvent, hashes []hashKey, out []Position) ([]Position, error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	tx, err := j.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: heads and shards cannot change under us
	if err != nil {
		return out, err
	}
	defer tx.Rollback()
	lay, err := j.layoutIn(ctx, tx)
	if err != nil {
		return out, err
	}
	// Route: the shards touched, in order of first use, and each event's shard.
	w := &j.w
	w.reset(len(events), len(lay.shards))
	for i, h := range hashes {
		w.route(lay.route(h), i)
	}
	headStmt := tx.StmtContext(ctx, j.appendHead)
	for _, s := range w.touched {
		var seq int64
		if err := headStmt.QueryRowContext(ctx, s).Scan(&seq); err != nil {
			return out, fmt.Errorf("corrupt journal: head of shard %d: %w", s, err)
		}
		w.heads[s] = seq
	}
	now := time.Now().UnixMilli()
	ins := tx.StmtContext(ctx, j.appendChunk)
	for _, s := range w.touched {
		seq := w.heads[s]
		for i := w.first[s]; i >= 0; {
			// One chunk: events of shard s from i while they fit in ChunkBytes (one at least).
			first := seq + 1
			w.buf = w.buf[:0]
			for i >= 0 && (len(w.buf) == 0 || len(w.buf)+encodedLen(&events[i]) <= ChunkBytes) {
				w.buf = appendEncoded(w.buf, &events[i])
				seq++
				w.seqs[i] = seq
				i = w.next[i]
			}
			if _, err := ins.ExecContext(ctx, s, first, seq, now, w.buf); err != nil {
				return out, err
			}
		}
		w.heads[s] = seq
	}
	upd := tx.StmtContext(ctx, j.appendSetHead)
	for _, s := range w.touched {
		if _, err := upd.ExecContext(ctx, w.heads[s], s); err != nil {
			return out, err
		}
	}
	if err := tx.Commit(); err != nil {
		return out, err
	}
	// The positions' sequence numbers share one string.
	w.buf = w.buf[:0]
	for _, seq := range w.seqs {
		w.buf = strconv.AppendInt(w.buf, seq, 10)
	}
	all, at := string(w.buf), 0
	for i, seq := range w.seqs {
		n := decimalLen(seq)
		out = append(out, Position{ShardID: lay.shards[w.shard[i]].ID, Seq: all[at : at+n]})
		at += n
	}
	return out, nil
}

// decimalLen is len(strconv.FormatInt(v, 10)) for v >= 0.
func decimalLen(v int64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// appendState is appendTx's scratch space, kept between transactions (under wmu). The slices
// indexed by shard have an entry for each shard of the layout; first is -1 for the shards not
// touched.
type appendState struct {
	touched []int   // shards in order of first use
	heads   []int64 // shard -> its last sequence number
	first   []int   // shard -> its first event
	tail    []int   // shard -> its last event so far
	next    []int   // event -> the next event of its shard, -1 for none
	shard   []int   // event -> its shard
	seqs    []int64 // event -> its sequence number
	buf     []byte  // a chunk being encoded
}

// reset prepares w for n events over shards shards.
func (w *appendState) reset(n, shards int) {
	for _, s := range w.touched {
		w.first[s] = -1
	}
	w.touched = w.touched[:0]
	for len(w.first) < shards {
		w.first = append(w.first, -1)
	}
	w.heads = slices.Grow(w.heads, shards)[:shards]
	w.tail = slices.Grow(w.tail, shards)[:shards]
	w.next = slices.Grow(w.next[:0], n)[:n]
	w.shard = slices.Grow(w.shard[:0], n)[:n]
	w.seqs = slices.Grow(w.seqs[:0], n)[:n]
}

// route puts event i on shard s, after the events routed there before.
func (w *appendState) route(s, i int) {
	w.next[i], w.shard[i] = -1, s
	if w.first[s] < 0 {
		w.first[s] = i
		w.touched = append(w.touched, s)
	} else {
		w.next[w.tail[s]] = i
	}
	w.tail[s] = i
}

// Head returns the sequence number of the last event of a shard ("" when it is empty), closed
// or open. Errors: source.ErrUnknownShard, SQLite errors.
func (j *Journal) Head(ctx context.Context, shardID string) (string, error) {
	st, err := j.shardState(ctx, "head of", shardID)
	if err != nil {
		return "", err
	}
	if st.head == st.base {
		return "", nil
	}
	return strconv.FormatInt(st.head, 10), nil
}

// Start returns the sequence number before a shard's first one: "" for the shards Create made
// (their events are numbered from 1), the largest last sequence number of its parents for a
// child of a split or merge. The shard's events are numbered from Start+1, so Head - Start is
// how many it holds and Head - max(cursor, Start) the events after a cursor. Errors:
// source.ErrUnknownShard, SQLite errors.
func (j *Journal) Start(ctx context.Context, shardID string) (string, error) {
	st, err := j.shardState(ctx, "start of", shardID)
	if err != nil || st.base == 0 {
		return "", err
	}
	return strconv.FormatInt(st.base, 10), nil
}

// state is a shard's head, closed flag and base, read in one statement.
type state struct {
	head, base int64
	closed     bool
}

// shardState reads the state of shardID; op names the operation in errors.
func (j *Journal) shardState(ctx context.Context, op, shardID string) (state, error) {
	i, ok := parseShardID(shardID)
	if !ok {
		return state{}, fmt.Errorf("journal: %s %q: %w", op, shardID, source.ErrUnknownShard)
	}
	st, err := j.state(ctx, i)
	if errors.Is(err, sql.ErrNoRows) {
		return state{}, fmt.Errorf("journal: %s %q: %w", op, shardID, source.ErrUnknownShard)
	}
	if err != nil {
		return state{}, fmt.Errorf("journal: %s %s: %w", op, shardID, err)
	}
	return st, nil
}

func (j *Journal) state(ctx context.Context, shard int) (state, error) {
	var st state
	err := j.headStmt.QueryRowContext(ctx, shard).Scan(&st.head, &st.closed, &st.base)
	return st, err
}

// Shards returns every shard of the journal, open and closed, in id order (so parents come
// before their children), with their ParentIDs and decimal hash key ranges. It reads the
// journal file, so it sees the splits and merges of other processes. The slices are the
// caller's. Errors: SQLite errors.
func (j *Journal) Shards(ctx context.Context) ([]source.Shard, error) {
	lay, err := j.layoutIn(ctx, j.db)
	if err != nil {
		return nil, fmt.Errorf("journal: list shards: %w", err)
	}
	out := make([]source.Shard, len(lay.shards))
	for i, s := range lay.shards {
		out[i] = s.Shard
		out[i].ParentIDs = slices.Clone(s.ParentIDs)
	}
	return out, nil
}

// Open returns a reader of shardID positioned after sequence number after ("" = the start).
// Errors: source.ErrUnknownShard; ErrInvalid when after is not a decimal number; ErrBeyondHead.
func (j *Journal) Open(ctx context.Context, shardID, after string) (source.ShardReader, error) {
	var pos int64
	if after != "" {
		var err error
		if pos, err = parseSeq(after); err != nil {
			return nil, fmt.Errorf("journal: open %s after %q: %w", shardID, after, err)
		}
	}
	st, err := j.shardState(ctx, "open", shardID)
	if err != nil {
		return nil, err
	}
	if pos > st.head {
		return nil, fmt.Errorf("journal: open %s after %s (last event %d): %w", shardID, after, st.head, ErrBeyondHead)
	}
	i, _ := parseShardID(shardID)
	return &reader{j: j, shard: i, id: shardID, last: max(pos, st.base), cur: chunkReader{next: 1}}, nil
}

// parseSeq parses a journal sequence number: a decimal number in int64 range.
func parseSeq(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("sequence number %q is not a decimal number: %w", s, ErrInvalid)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sequence number %q is not a journal sequence number: %w", s, ErrInvalid)
	}
	return v, nil
}

type reader struct {
	j     *Journal
	shard int
	id    string
	last  int64       // last sequence number returned (or the start position)
	cur   chunkReader // the rest of the last chunk read
}

// Read returns up to max events (DefaultReadMax when max <= 0, at most MaxRead) after the last
// returned one, and no more than DefaultReadBytes of event data (ReadBytes), polling every poll
// interval for up to wait when there are none. On a closed shard read to its end it returns
// source.ErrShardEnded at once (and on every later Read). EventsBehind is the exact count after the last
// event read at the time of the read; MillisBehind is 0 when caught up, else the age of the
// last event read.
func (r *reader) Read(ctx context.Context, max int, wait time.Duration) (source.Batch, error) {
	return r.ReadBytes(ctx, max, DefaultReadBytes, wait)
}

// ReadBytes is Read with a bound on the event data bytes returned: events are returned while
// their data adds up to at most maxBytes (DefaultReadBytes when maxBytes <= 0), the first one
// whatever its size (source.ByteBoundedReader).
func (r *reader) ReadBytes(ctx context.Context, max, maxBytes int, wait time.Duration) (source.Batch, error) {
	if max <= 0 {
		max = DefaultReadMax
	}
	max = min(max, MaxRead)
	if maxBytes <= 0 {
		maxBytes = DefaultReadBytes
	}
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return source.Batch{}, err
		}
		events, st, err := r.query(ctx, max, maxBytes)
		if err != nil {
			if ctx.Err() != nil {
				return source.Batch{}, ctx.Err()
			}
			return source.Batch{}, fmt.Errorf("journal: read %s: %w", r.id, err)
		}
		// Head and closed come from the snapshot the events were read in: closed with nothing
		// after r.last is the end (a split or merge commits the close after the parent's last
		// append).
		if len(events) == 0 && st.known && st.closed && r.last >= st.head {
			return source.Batch{}, source.ErrShardEnded
		}
		left := time.Until(deadline)
		if len(events) > 0 || left <= 0 {
			return r.batch(events, st), nil
		}
		d := min(left, r.j.poll)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return source.Batch{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// readState is a shard's head and closed flag as a read saw them (known false when the read
// could not tell).
type readState struct {
	head   int64
	closed bool
	known  bool
}

// query reads up to max events after r.last, stopping before the one that would take their
// data past maxBytes (the first is always taken), and the shard's head and closed flag in the
// same snapshot: one statement. The rest of the last chunk read is kept for the next call; the
// chunks after it are never loaded. A read the kept chunk satisfies reads the head alone; if
// that fails, the events are returned with the state unknown.
func (r *reader) query(ctx context.Context, max, maxBytes int) ([]source.Event, readState, error) {
	var events []source.Event
	var seqs []int64
	size := 0
	// take moves events from r.cur while they fit; it reports whether the read is complete.
	take := func() (bool, error) {
		for !r.cur.empty() {
			if len(events) == max {
				return true, nil
			}
			if len(events) > 0 {
				n, err := r.cur.peekLen()
				if err != nil {
					return false, err
				}
				if size+n > maxBytes {
					return true, nil // left for the next read
				}
			}
			seq := r.cur.next
			key, data, err := r.cur.decode()
			if err != nil {
				return false, err
			}
			if events == nil {
				events = make([]source.Event, 0, min(max, 64))
			}
			size += len(data)
			events = append(events, source.Event{ShardID: r.id, PartitionKey: key, ArrivalMs: r.cur.arrival, Data: data})
			seqs = append(seqs, seq)
			r.last = seq
		}
		return false, nil
	}
	st, err := r.fetch(ctx, max, take)
	setSeqs(events, seqs)
	return events, st, err
}

// fetch fills the read with take: from the kept chunk, then from the chunks after r.last.
func (r *reader) fetch(ctx context.Context, max int, take func() (bool, error)) (readState, error) {
	if r.cur.next == r.last+1 {
		done, err := take()
		if err != nil {
			return readState{}, err
		}
		if done {
			st, err := r.j.state(ctx, r.shard)
			if err != nil {
				return readState{}, nil // the events are read; only the state is unknown
			}
			return readState{head: st.head, closed: st.closed, known: true}, nil
		}
	}
	rows, err := r.j.readStmt.QueryContext(ctx, r.shard, r.last, max)
	if err != nil {
		return readState{}, err
	}
	defer rows.Close()
	var st readState
	for rows.Next() {
		var c chunkReader
		var first, last, arrival sql.NullInt64
		if r.j.version < 3 {
			var key sql.NullString
			var data []byte
			if err := rows.Scan(&st.head, &st.closed, &first, &last, &arrival, &key, &data); err != nil {
				return readState{}, err
			}
			c.b = appendEncoded(nil, &AppendEvent{PartitionKey: key.String, Data: data})
		} else if err := rows.Scan(&st.head, &st.closed, &first, &last, &arrival, &c.b); err != nil {
			return readState{}, err
		}
		st.known = true
		if !first.Valid {
			break // no events after r.last: the row holds the state alone
		}
		c.next, c.last, c.arrival = first.Int64, last.Int64, arrival.Int64
		if err := c.skip(r.last); err != nil {
			return readState{}, err
		}
		if c.empty() || c.next != r.last+1 {
			return readState{}, fmt.Errorf("corrupt journal: after %d, the next chunk holds %d to %d", r.last, c.next, c.last)
		}
		r.cur = c
		done, err := take()
		if done || err != nil {
			return st, err
		}
	}
	if err := rows.Err(); err != nil {
		return readState{}, err
	}
	if !st.known {
		return readState{}, fmt.Errorf("corrupt journal: no head for shard %d", r.shard)
	}
	return st, nil
}

// setSeqs sets events[i].Seq to seqs[i] in decimal, the strings sharing one allocation.
func setSeqs(events []source.Event, seqs []int64) {
	if len(events) == 0 {
		return
	}
	var buf []byte
	for _, seq := range seqs {
		buf = strconv.AppendInt(buf, seq, 10)
	}
	all, at := string(buf), 0
	for i, seq := range seqs {
		n := decimalLen(seq)
		events[i].Seq = all[at : at+n]
		at += n
	}
}

// batch is the Batch of events read with the shard's state st.
func (r *reader) batch(events []source.Event, st readState) source.Batch {
	b := source.Batch{Events: events, MillisBehind: -1, EventsBehind: -1}
	if !st.known {
		return b
	}
	b.EventsBehind = max(st.head-r.last, 0)
	switch {
	case b.EventsBehind == 0:
		b.MillisBehind = 0
	case len(events) > 0:
		b.MillisBehind = max(time.Now().UnixMilli()-events[len(events)-1].ArrivalMs, 0)
	}
	return b
}

// Close releases nothing (readers hold no resources) and exists for source.ShardReader.
func (r *reader) Close() error { return nil }

// wrapBusy turns SQLITE_BUSY into ErrBusy naming the file, the timeout and what may hold the
// lock, keeping the driver error in the chain.
func wrapBusy(err error, path string, busy time.Duration) error {
	if sqlitefile.IsBusy(err) {
		return fmt.Errorf("%w: %s stayed locked for longer than the busy timeout of %s "+
			"(a worker or appender paused or stuck inside a write? it holds the lock until it continues or is killed): %w",
			ErrBusy, path, busy, err)
	}
	return err
}

var (
	_ source.Source            = (*Journal)(nil)
	_ source.ByteBoundedReader = (*reader)(nil)
)

var _ source.Tailer = (*Journal)(nil)

// Tail returns the last n events of the shard (all when it holds fewer; none for n <= 0),
// oldest first. Errors: source.ErrUnknownShard, SQLite errors.
func (j *Journal) Tail(ctx context.Context, shardID string, n int) ([]source.Event, error) {
	st, err := j.shardState(ctx, "tail of", shardID)
	if err != nil || n <= 0 {
		return nil, err
	}
	after := ""
	if from := max(st.base, st.head-int64(n)); from > 0 {
		after = strconv.FormatInt(from, 10)
	}
	r, err := j.Open(ctx, shardID, after)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []source.Event
	for len(out) < n {
		b, err := r.Read(ctx, n-len(out), 0)
		if err != nil && !errors.Is(err, source.ErrShardEnded) {
			return nil, err
		}
		out = append(out, b.Events...)
		if err != nil || len(b.Events) == 0 {
			break
		}
	}
	return out, nil
}

// SeqBefore returns the position just before the shard's first event that arrived at or after
// t (by its arrival_ms, the append time of the appending process, in ms): the sequence number
// before that event ("" for the shard's first one), or the shard's head when none arrived
// since t. A reader opened after it reads that event next. Errors: source.ErrUnknownShard,
// SQLite errors.
func (j *Journal) SeqBefore(ctx context.Context, shardID string, t time.Time) (string, error) {
	st, err := j.shardState(ctx, "position by time of", shardID)
	if err != nil {
		return "", err
	}
	i, _ := parseShardID(shardID)
	q := `SELECT min(first_seq) FROM chunks WHERE shard = ? AND arrival_ms >= ?`
	if j.version < 3 {
		q = `SELECT min(seq) FROM events WHERE shard = ? AND arrival_ms >= ?`
	}
	var first sql.NullInt64
	if err := j.db.QueryRowContext(ctx, q, i, t.UnixMilli()).Scan(&first); err != nil {
		return "", fmt.Errorf("journal: position by time of %s: %w", shardID, err)
	}
	pos := st.head
	if first.Valid {
		pos = first.Int64 - 1
	}
	if pos <= 0 {
		return "", nil
	}
	return strconv.FormatInt(pos, 10), nil
}
