// Package sourcetest is the conformance suite for source.Source implementations (the local
// journal, Kinesis).
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
//			stream := createStream(t, shards) // a new, empty stream of evenly split shards
//			return stream, func(ctx context.Context, recs []sourcetest.Record) error { ... }
//		})
//	}
//
// The factory is called once per subtest and must return a new empty stream with the given number
// of open shards, whose hash key ranges split [0, 2^128-1] evenly (what Kinesis CreateStream
// does), and an Appender that writes to it. The suite appends about 250 records in all (Kinesis
// PutRecords takes up to 500 per call), checks only the source.Source contract, and tolerates
// what the contract allows a remote stream: short or empty reads before the end, MillisBehind
// and EventsBehind of -1, ArrivalMs of 0.
//
// Splits and merges (closed shards, ErrShardEnded, parent/child lineage) need stream-specific
// setup and are a separate part, RunResharding, that implementations able to reshard run as well.
package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/source"
)

// Record is one record to append.
type Record struct {
	PartitionKey string
	Data         []byte
}

// Appender appends records to the stream under test, in order (records of one partition key
// must keep their order). It returns once they are readable.
type Appender func(ctx context.Context, recs []Record) error

// Factory returns a new empty stream with the given shard count and its Appender.
type Factory func(t *testing.T, shards int) (source.Source, Appender)

// Option adjusts what Run expects of a stream, for servers that depart from Kinesis in a
// declared, harmless way.
type Option func(*options)

type options struct {
	hashKeySlack int64
}

// EvenSplitSlack lets a new stream's shard boundaries be up to keys hash keys away from the
// exact even split (source.EvenHashKeyRange, which is Amazon Kinesis'). kinesis-local 0.6.2
// (kinesis-mock) starts shard i of n at i*floor((2^128-1)/n) instead of floor(i*2^128/n): up
// to n-1 keys lower. The ranges must still cover [0, 2^128-1] without gaps or overlaps.
func EvenSplitSlack(keys int64) Option { return func(o *options) { o.hashKeySlack = keys } }

// Run runs the suite.
func Run(t *testing.T, newSource Factory, opts ...Option) {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	runSubtests(t, newSource, []subtest[Factory]{
		{"Shards", func(t *testing.T, f Factory) { testShards(t, f, o) }},
		{"Routing", testRouting},
		{"ReadMaxAndResume", testReadMaxAndResume},
		{"Wait", testWait},
		{"Context", testContext},
		{"UnknownShard", testUnknownShard},
		{"Concurrent", testConcurrent},
	})
}

// subtest is one named test of a suite over factories of type F.
type subtest[F any] struct {
	name string
	fn   func(t *testing.T, f F)
}

func runSubtests[F any](t *testing.T, f F, tests []subtest[F]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, f) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

func parseHashKey(t *testing.T, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || v.Sign() < 0 || v.Cmp(maxHashKey) > 0 {
		t.Fatalf("hash key %q is not a decimal number in [0, 2^128-1]", s)
	}
	return v
}

func shards(t *testing.T, src source.Source) []source.Shard {
	t.Helper()
	ss, err := src.Shards(ctxT(t))
	if err != nil {
		t.Fatalf("Shards: %v", err)
	}
	return ss
}

// shardOf returns the id of the shard whose hash key range holds the partition key.
func shardOf(t *testing.T, ss []source.Shard, pk string) string {
	t.Helper()
	h := source.HashKey(pk)
	for _, s := range ss {
		if !s.Closed && h.Cmp(parseHashKey(t, s.HashKeyStart)) >= 0 && h.Cmp(parseHashKey(t, s.HashKeyEnd)) <= 0 {
			return s.ID
		}
	}
	t.Fatalf("no open shard holds hash key %s of partition key %q", h, pk)
	return ""
}

func testShards(t *testing.T, newSource Factory, o options) {
	const n = 4
	src, _ := newSource(t, n)
	ss := shards(t, src)
	if len(ss) != n {
		t.Fatalf("Shards returned %d shards, want %d: %+v", len(ss), n, ss)
	}
	ids := map[string]bool{}
	for _, s := range ss {
		if s.ID == "" || ids[s.ID] {
			t.Fatalf("shard id %q empty or repeated: %+v", s.ID, ss)
		}
		ids[s.ID] = true
		if s.Closed || len(s.ParentIDs) != 0 {
			t.Fatalf("a new stream's shard %s is closed or has parents: %+v", s.ID, s)
		}
	}
	// The ranges split [0, 2^128-1] without gaps or overlaps, evenly (within the declared slack).
	slack := big.NewInt(o.hashKeySlack)
	near := func(got, want string) bool {
		d := new(big.Int).Sub(parseHashKey(t, got), parseHashKey(t, want))
		return d.CmpAbs(slack) <= 0
	}
	for i, s := range openCover(t, ss) {
		ws, we := source.EvenHashKeyRange(i, n)
		if !near(s.HashKeyStart, ws) || !near(s.HashKeyEnd, we) {
			t.Errorf("shard %s covers [%s, %s], want the even split [%s, %s] (slack %d keys)", s.ID, s.HashKeyStart, s.HashKeyEnd, ws, we, o.hashKeySlack)
		}
	}
}

// openCover checks that the open shards' hash key ranges cover [0, 2^128-1] without gaps or
// overlaps and returns the open shards sorted by range.
func openCover(t *testing.T, ss []source.Shard) []source.Shard {
	t.Helper()
	var sorted []source.Shard
	for _, s := range ss {
		if !s.Closed {
			sorted = append(sorted, s)
		}
	}
	slices.SortFunc(sorted, func(a, b source.Shard) int {
		return parseHashKey(t, a.HashKeyStart).Cmp(parseHashKey(t, b.HashKeyStart))
	})
	next := big.NewInt(0)
	for _, s := range sorted {
		start, end := parseHashKey(t, s.HashKeyStart), parseHashKey(t, s.HashKeyEnd)
		if start.Cmp(next) != 0 || end.Cmp(start) < 0 {
			t.Fatalf("open shard %s covers [%s, %s]; want it to start at %s: %+v", s.ID, start, end, next, ss)
		}
		next = new(big.Int).Add(end, big.NewInt(1))
	}
	if new(big.Int).Sub(next, big.NewInt(1)).Cmp(maxHashKey) != 0 {
		t.Fatalf("open shard ranges end at %s, want 2^128-1: %+v", new(big.Int).Sub(next, big.NewInt(1)), ss)
	}
	return sorted
}

// collector reads shards and checks what the contract says of every batch.
type collector struct {
	t       *testing.T
	src     source.Source
	readers map[string]source.ShardReader
	got     map[string][]source.Event // by shard
	total   int
	// window of acceptable arrival times, ms
	fromMs, toMs int64
}

func newCollector(t *testing.T, src source.Source, ss []source.Shard) *collector {
	c := &collector{t: t, src: src, readers: map[string]source.ShardReader{}, got: map[string][]source.Event{}}
	for _, s := range ss {
		c.open(s.ID)
	}
	return c
}

// open opens a reader of shard id at its start.
func (c *collector) open(id string) {
	c.t.Helper()
	c.openAt(id, "")
}

// openAt opens a reader of shard id after sequence number after.
func (c *collector) openAt(id, after string) {
	c.t.Helper()
	r, err := c.src.Open(ctxT(c.t), id, after)
	if err != nil {
		c.t.Fatalf("Open(%s, %q): %v", id, after, err)
	}
	c.t.Cleanup(func() { r.Close() })
	c.readers[id] = r
}

// read reads one batch of shard and checks it.
func (c *collector) read(id string, max int, wait time.Duration) source.Batch {
	c.t.Helper()
	b, ended := c.readOrEnd(id, max, wait)
	if ended {
		c.t.Fatalf("Read(%s) returned ErrShardEnded on a shard that was never closed", id)
	}
	return b
}

// readOrEnd is read that also takes source.ErrShardEnded, reporting it as ended.
func (c *collector) readOrEnd(id string, max int, wait time.Duration) (b source.Batch, ended bool) {
	t := c.t
	t.Helper()
	b, err := c.readers[id].Read(ctxT(t), max, wait)
	if errors.Is(err, source.ErrShardEnded) {
		if len(b.Events) != 0 {
			t.Fatalf("Read(%s) returned %d events with ErrShardEnded", id, len(b.Events))
		}
		return b, true
	}
	if err != nil {
		t.Fatalf("Read(%s): %v", id, err)
	}
	if len(b.Events) > max {
		t.Fatalf("Read(%s, max %d) returned %d events", id, max, len(b.Events))
	}
	if b.MillisBehind < -1 || b.EventsBehind < -1 {
		t.Fatalf("Read(%s): MillisBehind %d, EventsBehind %d; want >= -1", id, b.MillisBehind, b.EventsBehind)
	}
	for _, e := range b.Events {
		if e.ShardID != id {
			t.Fatalf("Read(%s) returned an event of shard %q", id, e.ShardID)
		}
		if e.Seq == "" || bytes.ContainsFunc([]byte(e.Seq), func(r rune) bool { return r < '0' || r > '9' }) {
			t.Fatalf("Read(%s): sequence number %q is not decimal", id, e.Seq)
		}
		if prev := c.got[id]; len(prev) > 0 && source.CompareSeq(e.Seq, prev[len(prev)-1].Seq) <= 0 {
			t.Fatalf("Read(%s): sequence number %s after %s; want strictly increasing", id, e.Seq, prev[len(prev)-1].Seq)
		}
		if e.ArrivalMs != 0 && c.toMs != 0 && (e.ArrivalMs < c.fromMs-2000 || e.ArrivalMs > c.toMs+2000) {
			t.Fatalf("Read(%s): ArrivalMs %d outside the append window [%d, %d] (2 s slack)", id, e.ArrivalMs, c.fromMs, c.toMs)
		}
		c.got[id] = append(c.got[id], e)
		c.total++
	}
	return b, false
}

// readAll reads every shard round-robin until want events were read in all, then checks that
// nothing more is there.
func (c *collector) readAll(want int) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.total < want {
		if time.Now().After(deadline) {
			t.Fatalf("read %d events within 30 s, want %d", c.total, want)
		}
		for id := range c.readers {
			c.read(id, 100, 50*time.Millisecond)
		}
	}
	if c.total != want {
		t.Fatalf("read %d events, want %d", c.total, want)
	}
	for id := range c.readers {
		if b := c.read(id, 100, 10*time.Millisecond); len(b.Events) != 0 {
			t.Fatalf("Read(%s) after the end returned %d more events", id, len(b.Events))
		}
	}
}

// writerBatch is batch b of writer w in the concurrent tests: per records, over the keys
// "w<w>-k0" to "w<w>-k2" in turn.
func writerBatch(w, b, per int) []Record {
	recs := make([]Record, per)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("w%d-k%d", w, i%3), b*per+i)
	}
	return recs
}

func appendT(t *testing.T, app Appender, recs []Record) {
	t.Helper()
	if err := app(ctxT(t), recs); err != nil {
		t.Fatalf("append %d records: %v", len(recs), err)
	}
}

func record(pk string, i int) Record {
	// Binary data: NUL and 0xff bytes survive.
	return Record{PartitionKey: pk, Data: fmt.Appendf([]byte{0, 0xff}, "%s#%03d", pk, i)}
}

// testRouting: each record lands on the shard whose range holds MD5(partition key), intact, in
// order per key.
func testRouting(t *testing.T, newSource Factory) {
	src, app := newSource(t, 3)
	ss := shards(t, src)
	var keys []string
	for i := 0; i < 20; i++ {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	keys = append(keys, "DTW", "Zürich ✈", "a")
	c := newCollector(t, src, ss)
	c.fromMs = time.Now().UnixMilli()
	var recs []Record
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			recs = append(recs, record(k, round))
		}
	}
	appendT(t, app, recs[:30])
	appendT(t, app, recs[30:])
	c.toMs = time.Now().UnixMilli()
	c.readAll(len(recs))

	perKey := map[string][]string{}
	for id, evs := range c.got {
		for _, e := range evs {
			if want := shardOf(t, ss, e.PartitionKey); want != id {
				t.Errorf("record of key %q read from shard %s, want %s (MD5 hash key range)", e.PartitionKey, id, want)
			}
			perKey[e.PartitionKey] = append(perKey[e.PartitionKey], string(e.Data))
		}
	}
	for _, k := range keys {
		var want []string
		for round := 0; round < 3; round++ {
			want = append(want, string(record(k, round).Data))
		}
		if !slices.Equal(perKey[k], want) {
			t.Errorf("records of key %q = %q, want %q", k, perKey[k], want)
		}
	}
	used := 0
	for _, evs := range c.got {
		if len(evs) > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("23 keys all landed on %d shard(s) of 3", used)
	}
}

// testReadMaxAndResume: max bounds a batch; Open(after) resumes right after a sequence number;
// EventsBehind counts what is left.
func testReadMaxAndResume(t *testing.T, newSource Factory) {
	src, app := newSource(t, 1)
	ss := shards(t, src)
	id := ss[0].ID
	var recs []Record
	for i := 0; i < 25; i++ {
		recs = append(recs, record("k", i))
	}
	appendT(t, app, recs)
	c := newCollector(t, src, ss)
	deadline := time.Now().Add(30 * time.Second)
	for c.total < 25 && time.Now().Before(deadline) {
		b := c.read(id, 10, 100*time.Millisecond)
		if b.EventsBehind != -1 && b.EventsBehind != int64(25-c.total) {
			t.Fatalf("EventsBehind after reading %d of 25 = %d, want %d or -1", c.total, b.EventsBehind, 25-c.total)
		}
		if c.total == 25 && b.MillisBehind > 0 && b.EventsBehind == 0 {
			t.Fatalf("MillisBehind = %d at the tip, want 0 or -1", b.MillisBehind)
		}
	}
	evs := c.got[id]
	if len(evs) != 25 {
		t.Fatalf("read %d events, want 25", len(evs))
	}
	for i, e := range evs {
		if !bytes.Equal(e.Data, recs[i].Data) || e.PartitionKey != "k" {
			t.Fatalf("event %d = %q/%q, want %q/k", i, e.PartitionKey, e.Data, recs[i].Data)
		}
	}
	for _, at := range []int{0, 9, 23, 24} {
		r, err := src.Open(ctxT(t), id, evs[at].Seq)
		if err != nil {
			t.Fatalf("Open after %s: %v", evs[at].Seq, err)
		}
		var next []source.Event
		for time.Now().Before(deadline) && len(next) < 24-at {
			b, err := r.Read(ctxT(t), 100, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			next = append(next, b.Events...)
			if at == 24 {
				break
			}
		}
		r.Close()
		if len(next) != 24-at || (len(next) > 0 && next[0].Seq != evs[at+1].Seq) {
			t.Fatalf("Open after event %d read %d events, want %d starting at seq %s", at, len(next), 24-at, evs[at+1].Seq)
		}
	}
}

// testWait: an empty shard returns an empty batch after waiting; a record appended during the
// wait is returned.
func testWait(t *testing.T, newSource Factory) {
	src, app := newSource(t, 1)
	id := shards(t, src)[0].ID
	r, err := src.Open(ctxT(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	b, err := r.Read(ctxT(t), 10, 300*time.Millisecond)
	if err != nil || len(b.Events) != 0 {
		t.Fatalf("Read of an empty shard = %d events, %v; want an empty batch", len(b.Events), err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Read with wait 300ms took %v", el)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := app(context.Background(), []Record{record("w", 1)}); err != nil {
			t.Errorf("append: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := r.Read(ctxT(t), 10, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) > 0 {
			if len(b.Events) != 1 || !bytes.Equal(b.Events[0].Data, record("w", 1).Data) {
				t.Fatalf("Read returned %+v, want the one appended record", b.Events)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a record appended while a reader waited was not read within 20 s")
		}
	}
}

// testContext: context errors come back as is.
func testContext(t *testing.T, newSource Factory) {
	src, _ := newSource(t, 1)
	id := shards(t, src)[0].ID
	r, err := src.Open(ctxT(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx, 10, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a canceled context: err = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = r.Read(ctx, 10, 30*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read whose context expires while waiting: err = %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Read returned %v after its context expired", el)
	}
}

func testUnknownShard(t *testing.T, newSource Factory) {
	src, _ := newSource(t, 2)
	for _, id := range []string{"shardId-000000000099", "no-such-shard"} {
		if r, err := src.Open(ctxT(t), id, ""); !errors.Is(err, source.ErrUnknownShard) {
			if r != nil {
				r.Close()
			}
			t.Fatalf("Open(%q): err = %v, want ErrUnknownShard", id, err)
		}
	}
}

// testConcurrent: appenders and readers at once; every record read exactly once, in order per key.
func testConcurrent(t *testing.T, newSource Factory) {
	src, app := newSource(t, 2)
	ss := shards(t, src)
	const writers, batches, per = 4, 3, 10
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				recs := writerBatch(w, b, per)
				if err := app(ctxT(t), recs); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	type result struct {
		evs []source.Event
		err error
	}
	results := make([]result, len(ss))
	var rwg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for i, s := range ss {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			r, err := src.Open(ctxT(t), s.ID, "")
			if err != nil {
				results[i].err = err
				return
			}
			defer r.Close()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				done := total == writers*batches*per
				mu.Unlock()
				if done {
					return
				}
				b, err := r.Read(ctxT(t), 7, 50*time.Millisecond)
				if err != nil {
					results[i].err = err
					return
				}
				results[i].evs = append(results[i].evs, b.Events...)
				mu.Lock()
				total += len(b.Events)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rwg.Wait()
	perKey := map[string][]string{}
	n := 0
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("reader of %s: %v", ss[i].ID, res.err)
		}
		for j, e := range res.evs {
			if j > 0 && source.CompareSeq(e.Seq, res.evs[j-1].Seq) <= 0 {
				t.Fatalf("shard %s: seq %s after %s", ss[i].ID, e.Seq, res.evs[j-1].Seq)
			}
			perKey[e.PartitionKey] = append(perKey[e.PartitionKey], string(e.Data))
			n++
		}
	}
	if n != writers*batches*per {
		t.Fatalf("read %d records, want %d", n, writers*batches*per)
	}
	for w := 0; w < writers; w++ {
		for k := 0; k < 3; k++ {
			pk := fmt.Sprintf("w%d-k%d", w, k)
			var want []string
			for j := 0; j < batches*per; j++ {
				if j%per%3 == k {
					want = append(want, string(record(pk, j).Data))
				}
			}
			if !slices.Equal(perKey[pk], want) {
				t.Fatalf("records of %s = %q, want %q", pk, perKey[pk], want)
			}
		}
	}
}
