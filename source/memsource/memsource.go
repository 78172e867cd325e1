// Package memsource is an in-memory event stream that reshards: a stand-in for a Kinesis stream
// in tests of code that must follow a live shard set (shards split, merged and closed while
// workers read).
//
// It behaves like the local journal (source/journal) and Kinesis where they agree:
//
//   - New creates n open shards with the journal's ids ("shardId-000000000000", ...; see ShardID)
//     over the hash key range [0, 2^128-1] split evenly (source.EvenHashKeyRange).
//   - Append puts each record on the open shard whose hash key range holds the MD5 of its
//     partition key (source.HashKey), as Kinesis does.
//   - Split closes a shard and creates two open children over the two halves of its range; Merge
//     closes two adjacent open shards and creates one open child over their union. New shards
//     take the next unused index (a stream of 4 shards gets shardId-000000000004 next). Closed
//     shards keep their events and stay listed by Shards.
//   - Readers of a closed shard read its events to the end and then get source.ErrShardEnded.
//
// # Sequence numbers
//
// One counter per stream numbers every record: the first record appended gets "1", the next
// "2", and so on, whatever its shard. So sequence numbers are unique in the stream and strictly
// increase within a shard, and every record of a child shard has a larger number than every
// record of its parents (Kinesis' numbers have the same properties), so the numbers of one
// partition key keep increasing across a split or merge. Within a shard they have gaps.
//
// All methods of *Stream are safe for concurrent use. Waiting readers are woken by appends and by
// the close of their shard (no polling).
package memsource

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/projhost/projhost/source"
)

// Limits. Sources: Amazon Kinesis Data Streams quotas (partition keys of 1 to 256 Unicode
// characters, records of at most 1 MiB, GetRecords returns at most 10,000 records); the same as
// the local journal's.
const (
	MaxPartitionKeyLen = 256     // Unicode characters
	MaxDataLen         = 1 << 20 // bytes
	// DefaultReadMax is the batch size Read uses when asked for max <= 0; MaxRead bounds max.
	DefaultReadMax = 1000
	MaxRead        = 10000
)

var (
	// ErrInvalid is returned for a record, hash key, sequence number or shard pair the stream
	// cannot take.
	ErrInvalid = errors.New("memsource: invalid input")
	// ErrShardClosed is returned by Split and Merge when a shard to reshard is already closed.
	ErrShardClosed = errors.New("memsource: shard is closed")
	// ErrNotAdjacent is returned by Merge when the two shards' hash key ranges do not touch.
	ErrNotAdjacent = errors.New("memsource: shards are not adjacent")
	// ErrReaderClosed is returned by Read after the reader's Close.
	ErrReaderClosed = errors.New("memsource: reader is closed")
)

// Record is one record to append.
type Record struct {
	PartitionKey string // 1 to MaxPartitionKeyLen Unicode characters; decides the shard
	Data         []byte // at most MaxDataLen bytes; copied by Append
}

// Position is where Append put a record.
type Position struct {
	ShardID string
	Seq     string
}

// Option configures New. Options are immutable values.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock sets the clock that stamps ArrivalMs on appended records and measures
// Batch.MillisBehind (default time.Now). It is called with the stream's lock held and must not
// call the stream. A nil now keeps the default.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// ShardID returns the id of the shard with index i: "shardId-" and i in 12 digits (Kinesis'
// format, the same as journal.ShardID).
func ShardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// Stream is an in-memory stream. Create it with New.
type Stream struct {
	now func() time.Time

	mu     sync.Mutex
	seq    uint64   // last sequence number given out (0 = none yet)
	shards []*shard // in creation order: parents before children
	byID   map[string]*shard
}

// shard is one shard; its fields below mu are guarded by Stream.mu.
type shard struct {
	id         string
	parents    []string
	start, end *big.Int // inclusive hash key range, immutable
	startS     string   // decimal forms of start and end
	endS       string

	closed bool
	seqs   []uint64       // sequence numbers of events, increasing
	events []source.Event // events[i].Seq is seqs[i] in decimal
	// wake is closed and replaced when events are appended or the shard closes.
	wake chan struct{}
}

// New returns a stream of shards open shards with ids ShardID(0) ... ShardID(shards-1) over
// evenly split hash key ranges, and no records. It panics unless shards >= 1.
func New(shards int, opts ...Option) *Stream {
	if shards < 1 {
		panic("memsource: New: need at least one shard")
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Stream{now: o.now, byID: map[string]*shard{}}
	for i := 0; i < shards; i++ {
		start, end := source.EvenHashKeyRange(i, shards)
		s.addShard(mustHashKey(start), mustHashKey(end), nil)
	}
	return s
}

func mustHashKey(d string) *big.Int {
	v, ok := new(big.Int).SetString(d, 10)
	if !ok {
		panic("memsource: bad hash key " + d)
	}
	return v
}

// addShard creates an open shard with the next index. The caller holds s.mu (or owns s).
func (s *Stream) addShard(start, end *big.Int, parents []string) *shard {
	sh := &shard{
		id:      ShardID(len(s.shards)),
		parents: parents,
		start:   start,
		end:     end,
		startS:  start.String(),
		endS:    end.String(),
		wake:    make(chan struct{}),
	}
	s.shards = append(s.shards, sh)
	s.byID[sh.id] = sh
	return sh
}

// closeShard closes sh and wakes its readers. The caller holds s.mu.
func (sh *shard) closeShard() {
	sh.closed = true
	sh.notify()
}

// notify wakes the readers waiting on sh. The caller holds s.mu.
func (sh *shard) notify() {
	close(sh.wake)
	sh.wake = make(chan struct{})
}

// lookup returns the shard with id. The caller holds s.mu.
func (s *Stream) lookup(op, id string) (*shard, error) {
	sh, ok := s.byID[id]
	if !ok {
		return nil, fmt.Errorf("memsource: %s %q: %w", op, id, source.ErrUnknownShard)
	}
	return sh, nil
}

// Append appends records in order, each to the open shard whose hash key range holds the MD5 of
// its partition key, and returns their positions (one per record, in order). A call is atomic:
// all records are appended, with consecutive sequence numbers and the same ArrivalMs, or none.
// Errors: ErrInvalid (a partition key of 0 or more than MaxPartitionKeyLen characters, data over
// MaxDataLen bytes), the context's error when ctx is done before the call.
func (s *Stream) Append(ctx context.Context, recs []Record) ([]Position, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hashes := make([]*big.Int, len(recs))
	for i, r := range recs {
		if r.PartitionKey == "" || utf8.RuneCountInString(r.PartitionKey) > MaxPartitionKeyLen {
			return nil, fmt.Errorf("memsource: append: record %d: partition key must have 1 to %d characters: %w",
				i, MaxPartitionKeyLen, ErrInvalid)
		}
		if len(r.Data) > MaxDataLen {
			return nil, fmt.Errorf("memsource: append: record %d: data of %d bytes exceeds %d: %w",
				i, len(r.Data), MaxDataLen, ErrInvalid)
		}
		hashes[i] = source.HashKey(r.PartitionKey)
	}
	out := make([]Position, len(recs))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixMilli()
	touched := map[*shard]bool{}
	for i, r := range recs {
		sh := s.route(hashes[i])
		s.seq++
		e := source.Event{
			ShardID:      sh.id,
			Seq:          strconv.FormatUint(s.seq, 10),
			PartitionKey: r.PartitionKey,
			ArrivalMs:    now,
			Data:         slices.Clone(r.Data),
		}
		if e.Data == nil {
			e.Data = []byte{}
		}
		sh.seqs = append(sh.seqs, s.seq)
		sh.events = append(sh.events, e)
		touched[sh] = true
		out[i] = Position{ShardID: sh.id, Seq: e.Seq}
	}
	for sh := range touched {
		sh.notify()
	}
	return out, nil
}

// route returns the open shard holding hash key h. The open shards' ranges always cover
// [0, 2^128-1] without gaps or overlaps. The caller holds s.mu.
func (s *Stream) route(h *big.Int) *shard {
	for _, sh := range s.shards {
		if !sh.closed && h.Cmp(sh.start) >= 0 && h.Cmp(sh.end) <= 0 {
			return sh
		}
	}
	panic("memsource: no open shard holds hash key " + h.String())
}

// Split closes the open shard shardID and creates two open children, each with ParentIDs
// [shardID]: the first over the lower half of its hash key range, [start, mid-1], the second over
// [mid, end], where mid = start + (end-start+1)/2. Records appended afterwards go to the children.
// Errors: source.ErrUnknownShard, ErrShardClosed, ErrInvalid when the range holds a single hash
// key.
func (s *Stream) Split(shardID string) (children [2]string, err error) {
	return s.split(shardID, "")
}

// SplitAt is Split with the second child starting at hashKey (a decimal string, Kinesis
// SplitShard's NewStartingHashKey): the children cover [start, hashKey-1] and [hashKey, end].
// Errors: as Split, and ErrInvalid unless start < hashKey <= end.
func (s *Stream) SplitAt(shardID, hashKey string) (children [2]string, err error) {
	if hashKey == "" {
		return children, fmt.Errorf("memsource: split %s at an empty hash key: %w", shardID, ErrInvalid)
	}
	return s.split(shardID, hashKey)
}

// split splits at hashKey, or at the midpoint when hashKey is "".
func (s *Stream) split(shardID, hashKey string) (children [2]string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup("split", shardID)
	if err != nil {
		return children, err
	}
	if p.closed {
		return children, fmt.Errorf("memsource: split %s: %w", shardID, ErrShardClosed)
	}
	var mid *big.Int
	if hashKey == "" {
		mid = new(big.Int).Sub(p.end, p.start)
		mid.Add(mid, big.NewInt(1)).Rsh(mid, 1).Add(mid, p.start)
	} else {
		v, ok := new(big.Int).SetString(hashKey, 10)
		if !ok || hashKey[0] < '0' || hashKey[0] > '9' {
			return children, fmt.Errorf("memsource: split %s at %q: not a decimal hash key: %w", shardID, hashKey, ErrInvalid)
		}
		mid = v
	}
	if mid.Cmp(p.start) <= 0 || mid.Cmp(p.end) > 0 {
		return children, fmt.Errorf("memsource: split %s [%s, %s] at %s: the split hash key must be above the start and at most the end: %w",
			shardID, p.startS, p.endS, mid, ErrInvalid)
	}
	p.closeShard()
	lo := s.addShard(p.start, new(big.Int).Sub(mid, big.NewInt(1)), []string{p.id})
	hi := s.addShard(mid, p.end, []string{p.id})
	return [2]string{lo.id, hi.id}, nil
}

// Merge closes the open shards a and b, whose hash key ranges must be adjacent (in either order),
// and creates one open child over their union with ParentIDs [a, b]. Records appended afterwards
// go to the child. Errors: source.ErrUnknownShard, ErrShardClosed, ErrNotAdjacent, ErrInvalid when
// a == b.
func (s *Stream) Merge(a, b string) (child string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a == b {
		return "", fmt.Errorf("memsource: merge %s with itself: %w", a, ErrInvalid)
	}
	sa, err := s.lookup("merge", a)
	if err != nil {
		return "", err
	}
	sb, err := s.lookup("merge", b)
	if err != nil {
		return "", err
	}
	for _, sh := range []*shard{sa, sb} {
		if sh.closed {
			return "", fmt.Errorf("memsource: merge %s and %s: %s: %w", a, b, sh.id, ErrShardClosed)
		}
	}
	lo, hi := sa, sb
	if lo.start.Cmp(hi.start) > 0 {
		lo, hi = hi, lo
	}
	if new(big.Int).Add(lo.end, big.NewInt(1)).Cmp(hi.start) != 0 {
		return "", fmt.Errorf("memsource: merge %s [%s, %s] and %s [%s, %s]: %w",
			a, sa.startS, sa.endS, b, sb.startS, sb.endS, ErrNotAdjacent)
	}
	sa.closeShard()
	sb.closeShard()
	return s.addShard(lo.start, hi.end, []string{a, b}).id, nil
}

// Shards returns every shard, open and closed, in creation order (so parents come before their
// children), with decimal hash key ranges. The slice and its ParentIDs are the caller's. It never
// fails; ctx is not used.
func (s *Stream) Shards(ctx context.Context) ([]source.Shard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]source.Shard, len(s.shards))
	for i, sh := range s.shards {
		out[i] = source.Shard{
			ID:           sh.id,
			ParentIDs:    slices.Clone(sh.parents),
			HashKeyStart: sh.startS,
			HashKeyEnd:   sh.endS,
			Closed:       sh.closed,
		}
	}
	return out, nil
}

// Head returns the sequence number of the last record of a shard, "" when it has none. ctx is
// not used. Errors: source.ErrUnknownShard.
func (s *Stream) Head(ctx context.Context, shardID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, err := s.lookup("head", shardID)
	if err != nil {
		return "", err
	}
	if len(sh.events) == 0 {
		return "", nil
	}
	return sh.events[len(sh.events)-1].Seq, nil
}

// Open returns a reader of shardID (open or closed) positioned after sequence number after: ""
// for the shard's start, else the sequence number of one of the shard's records. ctx is not used.
// Errors: source.ErrUnknownShard; ErrInvalid when after is not a record of the shard.
func (s *Stream) Open(ctx context.Context, shardID, after string) (source.ShardReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, err := s.lookup("open", shardID)
	if err != nil {
		return nil, err
	}
	next := 0
	if after != "" {
		v, err := strconv.ParseUint(after, 10, 64)
		i, found := slices.BinarySearch(sh.seqs, v)
		if err != nil || !found {
			return nil, fmt.Errorf("memsource: open %s after %q: not a sequence number of the shard: %w", shardID, after, ErrInvalid)
		}
		next = i + 1
	}
	return &reader{s: s, sh: sh, next: next}, nil
}

// reader reads one shard; next is only touched by the goroutine calling Read.
type reader struct {
	s      *Stream
	sh     *shard
	next   int // index of the next event to return
	closed atomic.Bool
}

// Read returns up to max events (DefaultReadMax when max <= 0, at most MaxRead) after the last
// returned one. When there are none it waits up to wait for an append to the shard, or its close;
// an empty batch after the wait is not an error. EventsBehind is the exact number of events after
// the last one returned; MillisBehind is 0 when that number is 0, else the clock's time minus
// the ArrivalMs of the last event returned (at least 0). Errors: source.ErrShardEnded once the
// shard is closed and every event was returned (a batch holding the last events comes first,
// without error); the context's error as is (checked first); ErrReaderClosed after Close.
func (r *reader) Read(ctx context.Context, max int, wait time.Duration) (source.Batch, error) {
	if max <= 0 {
		max = DefaultReadMax
	}
	max = min(max, MaxRead)
	var timer <-chan time.Time
	for {
		if err := ctx.Err(); err != nil {
			return source.Batch{}, err
		}
		if r.closed.Load() {
			return source.Batch{}, fmt.Errorf("memsource: read %s: %w", r.sh.id, ErrReaderClosed)
		}
		b, wake, err := r.take(max)
		if err != nil || len(b.Events) > 0 {
			return b, err
		}
		if timer == nil {
			if wait <= 0 {
				return b, nil
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return source.Batch{}, ctx.Err()
		case <-timer:
			return b, nil
		case <-wake:
		}
	}
}

// take returns up to limit events after the last returned one, or, when there are none, an empty
// batch and the channel that is closed at the next change of the shard.
func (r *reader) take(limit int) (source.Batch, <-chan struct{}, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	sh := r.sh
	avail := sh.events[r.next:]
	if len(avail) == 0 {
		if sh.closed {
			return source.Batch{}, nil, fmt.Errorf("memsource: read %s: %w", sh.id, source.ErrShardEnded)
		}
		return source.Batch{}, sh.wake, nil
	}
	n := min(len(avail), limit)
	evs := make([]source.Event, n)
	for i, e := range avail[:n] {
		e.Data = slices.Clone(e.Data)
		evs[i] = e
	}
	r.next += n
	b := source.Batch{Events: evs, EventsBehind: int64(len(avail) - n)}
	if b.EventsBehind > 0 {
		b.MillisBehind = max(r.s.now().UnixMilli()-evs[n-1].ArrivalMs, 0)
	}
	return b, nil, nil
}

// Close makes later Reads fail with ErrReaderClosed. It holds no resources and never fails.
func (r *reader) Close() error {
	r.closed.Store(true)
	return nil
}

var (
	_ source.Source = (*Stream)(nil)
	_ source.Header = (*Stream)(nil)
)
