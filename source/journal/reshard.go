package journal

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/projhost/projhost/source"
)

// schemaVersion is the journal schema this package writes: 2 added the shards table (hash key
// ranges, parents, closed, base) for splits and merges (version 1 had none: its shards were
// meta "shards" evenly split ones); 3 replaced the events table (a row per event) by chunks (a
// row per shard per transaction).
const schemaVersion = 3

// reshardedCount is meta "shards" of a resharded journal: what a projhost from before
// resharding reports as a corrupt shard count when it opens the journal.
const reshardedCount = "resharded: open this journal with a projhost that has journal split and merge"

// hashKey is a 128-bit hash key as two big-endian halves.
type hashKey struct{ hi, lo uint64 }

func (h hashKey) less(o hashKey) bool { return h.hi < o.hi || (h.hi == o.hi && h.lo < o.lo) }

// hashOf is the hash key of a partition key: MD5 of its bytes, big-endian (source.HashKey).
func hashOf(partitionKey string) hashKey {
	sum := md5.Sum([]byte(partitionKey))
	return hashKey{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// parseHashKey parses a decimal hash key in [0, 2^128-1].
func parseHashKey(d string) (*big.Int, bool) {
	if d == "" || d[0] < '0' || d[0] > '9' {
		return nil, false
	}
	v, ok := new(big.Int).SetString(d, 10)
	if !ok || v.Cmp(maxHashKey) > 0 {
		return nil, false
	}
	return v, true
}

func toHashKey(v *big.Int) hashKey {
	var b [16]byte
	v.FillBytes(b[:])
	return hashKey{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// shardRow is one row of the shards table.
type shardRow struct {
	source.Shard
	start, end *big.Int
	base       int64
}

// layout is the journal's shard set at one generation.
type layout struct {
	gen    int64
	shards []shardRow // by index
	even   bool       // the shards Create made, never resharded: route with EvenShardForHash
	open   []int      // indexes of the open shards in hash key order
	starts []hashKey  // open[k]'s first hash key
}

// route returns the index of the open shard holding h. The open shards cover [0, 2^128-1].
func (l *layout) route(h hashKey) int {
	if l.even {
		return source.EvenShardForHash(h.hi, h.lo, len(l.shards))
	}
	k := sort.Search(len(l.starts), func(k int) bool { return h.less(l.starts[k]) }) - 1
	return l.open[k]
}

// index builds open and starts.
func (l *layout) index() error {
	for i, s := range l.shards {
		if !s.Closed {
			l.open = append(l.open, i)
		}
	}
	sort.Slice(l.open, func(a, b int) bool { return l.shards[l.open[a]].start.Cmp(l.shards[l.open[b]].start) < 0 })
	next := new(big.Int)
	for _, i := range l.open {
		s := l.shards[i]
		if s.start.Cmp(next) != 0 {
			return fmt.Errorf("corrupt journal: the open shards do not cover the hash key range at %s", next)
		}
		l.starts = append(l.starts, toHashKey(s.start))
		next = new(big.Int).Add(s.end, big.NewInt(1))
	}
	if next.Cmp(new(big.Int).Add(maxHashKey, big.NewInt(1))) != 0 {
		return fmt.Errorf("corrupt journal: the open shards end at %s, not at 2^128-1", next)
	}
	return nil
}

// evenLayout is the layout of n shards as Create makes them.
func evenLayout(n int) *layout {
	l := &layout{even: true, shards: make([]shardRow, n)}
	for i := range l.shards {
		start, end := source.EvenHashKeyRange(i, n)
		l.shards[i] = newRow(i, nil, start, end, false, 0)
	}
	return l
}

func newRow(i int, parents []string, start, end string, closed bool, base int64) shardRow {
	s, _ := parseHashKey(start)
	e, _ := parseHashKey(end)
	return shardRow{
		Shard: source.Shard{ID: ShardID(i), ParentIDs: parents, HashKeyStart: start, HashKeyEnd: end, Closed: closed},
		start: s, end: e, base: base,
	}
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// layoutIn returns the layout as q sees it: the cached one when the generation is unchanged.
func (j *Journal) layoutIn(ctx context.Context, q querier) (*layout, error) {
	if j.version == 1 {
		j.lmu.Lock()
		defer j.lmu.Unlock()
		if j.lay == nil {
			j.lay = evenLayout(j.shards)
		}
		return j.lay, nil
	}
	gen, err := readGeneration(ctx, q)
	if err != nil {
		return nil, err
	}
	j.lmu.Lock()
	lay := j.lay
	j.lmu.Unlock()
	if lay != nil && lay.gen == gen {
		return lay, nil
	}
	if lay, err = loadLayout(ctx, q, gen); err != nil {
		return nil, err
	}
	j.lmu.Lock()
	if j.lay == nil || j.lay.gen < gen {
		j.lay = lay
	}
	j.lmu.Unlock()
	return lay, nil
}

func readGeneration(ctx context.Context, q querier) (int64, error) {
	return readMetaInt(ctx, q, "generation", 0, 0)
}

// readMetaInt reads meta key as a decimal number of at least least; dflt when absent.
func readMetaInt(ctx context.Context, q querier, key string, dflt, least int64) (int64, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return dflt, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least {
		return 0, fmt.Errorf("corrupt journal: %s %q", key, v)
	}
	return n, nil
}

// loadLayout reads the shards table.
func loadLayout(ctx context.Context, q querier, gen int64) (*layout, error) {
	rows, err := q.QueryContext(ctx, `SELECT shard, parents, hash_start, hash_end, closed, base FROM shards ORDER BY shard`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	l := &layout{gen: gen, even: gen == 0}
	for rows.Next() {
		var i int
		var parents, start, end string
		var closed bool
		var base int64
		if err := rows.Scan(&i, &parents, &start, &end, &closed, &base); err != nil {
			return nil, err
		}
		if i != len(l.shards) {
			return nil, fmt.Errorf("corrupt journal: shard %d listed after %d shards", i, len(l.shards))
		}
		if _, ok := parseHashKey(start); !ok {
			return nil, fmt.Errorf("corrupt journal: shard %d starts at %q", i, start)
		}
		if _, ok := parseHashKey(end); !ok {
			return nil, fmt.Errorf("corrupt journal: shard %d ends at %q", i, end)
		}
		var pids []string
		if parents != "" {
			for _, p := range strings.Split(parents, ",") {
				pi, err := strconv.Atoi(p)
				if err != nil || pi < 0 || pi >= i {
					return nil, fmt.Errorf("corrupt journal: shard %d has parents %q", i, parents)
				}
				pids = append(pids, ShardID(pi))
			}
		}
		l.shards = append(l.shards, newRow(i, pids, start, end, closed, base))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(l.shards) == 0 {
		return nil, errors.New("corrupt journal: no shards")
	}
	if err := l.index(); err != nil {
		return nil, err
	}
	return l, nil
}

// insertEvenShards inserts the shards rows of n evenly split shards.
func insertEvenShards(ctx context.Context, tx *sql.Tx, n int) error {
	for i := 0; i < n; i++ {
		start, end := source.EvenHashKeyRange(i, n)
		if _, err := tx.ExecContext(ctx, `INSERT INTO shards (shard, parents, hash_start, hash_end, closed, base) VALUES (?, '', ?, ?, 0, 0)`,
			i, start, end); err != nil {
			return err
		}
	}
	return nil
}

// readVersion returns the schema version in meta (1 when there is none).
func readVersion(ctx context.Context, q querier) (int, error) {
	v, err := readMetaInt(ctx, q, "version", 1, 1)
	return int(v), err
}

// checkVersion sets j.version for a read-only journal, and refuses newer versions.
func (j *Journal) checkVersion() error {
	v, err := readVersion(context.Background(), j.db)
	if err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this projhost's %d: use a newer projhost", v, schemaVersion)
	}
	j.version = v
	return nil
}

// migrate upgrades a journal of an older schema version in one transaction: version 1 gets the
// shards table with the even split of its shard count; the events of versions 1 and 2 move to
// chunks (consecutive events of a shard with the same arrival time, up to ChunkBytes each) and
// the events table is dropped, so that a projhost of version 2 or older that has the journal
// open fails instead of writing where nobody reads. Newer versions are refused.
func (j *Journal) migrate() error {
	ctx := context.Background()
	v, err := readVersion(ctx, j.db)
	if err != nil || v == schemaVersion {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this projhost's %d: use a newer projhost", v, schemaVersion)
	}
	return j.writeTx(ctx, func(tx *sql.Tx) error {
		v, err := readVersion(ctx, tx)
		if err != nil || v == schemaVersion {
			return err // another process upgraded it meanwhile
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return err
		}
		if v == 1 {
			if err := insertEvenShards(ctx, tx, j.shards); err != nil {
				return err
			}
		}
		if err := eventsToChunks(ctx, tx); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.Itoa(schemaVersion))
		return err
	})
}

// eventsToChunks moves the events table's rows to chunks and drops it.
func eventsToChunks(ctx context.Context, tx *sql.Tx) error {
	var c struct {
		shard, first, last, arrival int64
		buf                         []byte
	}
	flush := func() error {
		if len(c.buf) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO chunks (shard, first_seq, last_seq, arrival_ms, events) VALUES (?, ?, ?, ?, ?)`,
			c.shard, c.first, c.last, c.arrival, c.buf)
		c.buf = c.buf[:0]
		return err
	}
	// Pages of rows in (shard, seq) order, each read to its end before the chunks are written.
	type row struct {
		shard, seq, arrival int64
		e                   AppendEvent
	}
	var after struct{ shard, seq int64 }
	after.shard = -1
	for {
		rows, err := tx.QueryContext(ctx, `SELECT shard, seq, arrival_ms, partition_key, data FROM events
			WHERE (shard, seq) > (?, ?) ORDER BY shard, seq LIMIT 10000`, after.shard, after.seq)
		if err != nil {
			return err
		}
		var page []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.shard, &r.seq, &r.arrival, &r.e.PartitionKey, &r.e.Data); err != nil {
				rows.Close()
				return err
			}
			page = append(page, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if len(c.buf) > 0 && (r.shard != c.shard || r.seq != c.last+1 || r.arrival != c.arrival ||
				len(c.buf)+encodedLen(&r.e) > ChunkBytes) {
				if err := flush(); err != nil {
					return err
				}
			}
			if len(c.buf) == 0 {
				c.shard, c.first, c.arrival = r.shard, r.seq, r.arrival
			}
			c.buf = appendEncoded(c.buf, &r.e)
			c.last = r.seq
		}
		after.shard, after.seq = page[len(page)-1].shard, page[len(page)-1].seq
	}
	if err := flush(); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DROP TABLE events`)
	return err
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE: other writers wait for it, in this
// process and others) and commits when fn returns nil.
func (j *Journal) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Split closes the open shard shardID and creates two open children with the next shard ids,
// each with ParentIDs [shardID]: the first over [start, at-1], the second over [at, end], where
// at is hashKey (a decimal string, Kinesis SplitShard's NewStartingHashKey) or, when hashKey is
// "", the midpoint start + (end-start+1)/2 (as memsource.Split). Events appended afterwards, by
// any process, go to the children; their sequence numbers continue after the parent's last.
// The change is one transaction. Errors: source.ErrUnknownShard; ErrShardClosed; ErrInvalid
// for a hash key that is not a decimal number with start < at <= end, for a range of a single
// hash key, or when the journal would have more than MaxShards shards; ErrBusy; SQLite errors.
func (j *Journal) Split(ctx context.Context, shardID, hashKey string) (children [2]string, err error) {
	var kids []int
	err = j.reshard(ctx, "split "+shardID, func(tx *sql.Tx, lay *layout) error {
		p, err := lay.lookup(shardID)
		if err != nil {
			return err
		}
		var at *big.Int
		if hashKey == "" {
			at = new(big.Int).Sub(p.end, p.start)
			at.Add(at, big.NewInt(1)).Rsh(at, 1).Add(at, p.start)
		} else {
			var ok bool
			if at, ok = parseHashKey(hashKey); !ok {
				return fmt.Errorf("hash key %q is not a decimal number from 0 to 2^128-1: %w", hashKey, ErrInvalid)
			}
		}
		if at.Cmp(p.start) <= 0 || at.Cmp(p.end) > 0 {
			return fmt.Errorf("at %s: the new starting hash key must be above the shard's start %s and at most its end %s: %w",
				at, p.HashKeyStart, p.HashKeyEnd, ErrInvalid)
		}
		head, err := shardHead(ctx, tx, p)
		if err != nil {
			return err
		}
		lo, hi := p.HashKeyStart, new(big.Int).Sub(at, big.NewInt(1)).String()
		if kids, err = addChildren(ctx, tx, lay, head, []*shardRow{p}, [][2]string{{lo, hi}, {at.String(), p.HashKeyEnd}}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return children, err
	}
	return [2]string{ShardID(kids[0]), ShardID(kids[1])}, nil
}

// Merge closes the open shards a and b, whose hash key ranges must be adjacent (in either order;
// Kinesis MergeShards' rule), and creates one open child with the next shard id over their
// union, with ParentIDs [a, b]. Events appended afterwards go to the child; its sequence numbers
// continue after the larger of its parents' last ones. The change is one transaction. Errors:
// source.ErrUnknownShard; ErrShardClosed; ErrNotAdjacent; ErrInvalid when a == b or the journal
// would have more than MaxShards shards; ErrBusy; SQLite errors.
func (j *Journal) Merge(ctx context.Context, a, b string) (child string, err error) {
	var kids []int
	err = j.reshard(ctx, "merge "+a+" and "+b, func(tx *sql.Tx, lay *layout) error {
		if a == b {
			return fmt.Errorf("a shard cannot merge with itself: %w", ErrInvalid)
		}
		sa, err := lay.lookup(a)
		if err != nil {
			return err
		}
		sb, err := lay.lookup(b)
		if err != nil {
			return err
		}
		lo, hi := sa, sb
		if lo.start.Cmp(hi.start) > 0 {
			lo, hi = hi, lo
		}
		if new(big.Int).Add(lo.end, big.NewInt(1)).Cmp(hi.start) != 0 {
			return fmt.Errorf("%s is [%s, %s], %s is [%s, %s]: %w",
				a, sa.HashKeyStart, sa.HashKeyEnd, b, sb.HashKeyStart, sb.HashKeyEnd, ErrNotAdjacent)
		}
		ha, err := shardHead(ctx, tx, sa)
		if err != nil {
			return err
		}
		hb, err := shardHead(ctx, tx, sb)
		if err != nil {
			return err
		}
		kids, err = addChildren(ctx, tx, lay, max(ha, hb), []*shardRow{sa, sb}, [][2]string{{lo.HashKeyStart, hi.HashKeyEnd}})
		return err
	})
	if err != nil {
		return "", err
	}
	return ShardID(kids[0]), nil
}

// lookup returns the open shard id. Errors: source.ErrUnknownShard, ErrShardClosed.
func (l *layout) lookup(id string) (*shardRow, error) {
	i, ok := parseShardID(id)
	if !ok || i >= len(l.shards) {
		return nil, fmt.Errorf("%q: %w", id, source.ErrUnknownShard)
	}
	s := &l.shards[i]
	if s.Closed {
		return nil, fmt.Errorf("%s: %w", id, ErrShardClosed)
	}
	return s, nil
}

func shardHead(ctx context.Context, tx *sql.Tx, s *shardRow) (int64, error) {
	i, _ := parseShardID(s.ID)
	var h int64
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM heads WHERE shard = ?`, i).Scan(&h); err != nil {
		return 0, fmt.Errorf("corrupt journal: head of %s: %w", s.ID, err)
	}
	return h, nil
}

// addChildren closes parents and adds children over ranges, numbered after base, with the next
// indexes, and returns the indexes.
func addChildren(ctx context.Context, tx *sql.Tx, lay *layout, base int64, parents []*shardRow, ranges [][2]string) ([]int, error) {
	next := len(lay.shards)
	if next+len(ranges) > MaxShards {
		return nil, fmt.Errorf("the journal has %d shards (open and closed); at most %d: %w", next, MaxShards, ErrInvalid)
	}
	pids := make([]string, len(parents))
	for k, p := range parents {
		i, _ := parseShardID(p.ID)
		pids[k] = strconv.Itoa(i)
		if _, err := tx.ExecContext(ctx, `UPDATE shards SET closed = 1 WHERE shard = ?`, i); err != nil {
			return nil, err
		}
	}
	var kids []int
	for k, r := range ranges {
		i := next + k
		if _, err := tx.ExecContext(ctx, `INSERT INTO shards (shard, parents, hash_start, hash_end, closed, base) VALUES (?, ?, ?, ?, 0, ?)`,
			i, strings.Join(pids, ","), r[0], r[1], base); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO heads (shard, seq) VALUES (?, ?)`, i, base); err != nil {
			return nil, err
		}
		kids = append(kids, i)
	}
	return kids, nil
}

// reshard runs change in one write transaction on the current layout and bumps the generation.
func (j *Journal) reshard(ctx context.Context, op string, change func(*sql.Tx, *layout) error) error {
	if j.ro {
		return fmt.Errorf("journal: %s: the journal is open read-only (open it with Open): %w", op, ErrInvalid)
	}
	err := j.writeTx(ctx, func(tx *sql.Tx) error {
		gen, err := readGeneration(ctx, tx)
		if err != nil {
			return err
		}
		lay, err := loadLayout(ctx, tx, gen)
		if err != nil {
			return err
		}
		if err := change(tx, lay); err != nil {
			return err
		}
		// A projhost without resharding reads "shards" as its shard count: make it refuse the
		// journal rather than append to closed shards.
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO meta (key, value)
			SELECT 'created_shards', value FROM meta WHERE key = 'shards'`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'shards'`, reshardedCount); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('generation', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.FormatInt(gen+1, 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("journal: %s: %w", op, wrapBusy(err, j.path, j.busy))
	}
	return nil
}
