package memsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/sourcetest"
)

func appender(s *Stream) sourcetest.Appender {
	return func(ctx context.Context, recs []sourcetest.Record) error {
		rs := make([]Record, len(recs))
		for i, r := range recs {
			rs[i] = Record{PartitionKey: r.PartitionKey, Data: r.Data}
		}
		_, err := s.Append(ctx, rs)
		return err
	}
}

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
		s := New(shards)
		return s, appender(s)
	})
}

func TestConformanceResharding(t *testing.T) {
	sourcetest.RunResharding(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender, sourcetest.Resharder) {
		s := New(shards)
		return s, appender(s), sourcetest.Resharder{
			Split: func(ctx context.Context, id string) ([2]string, error) { return s.Split(id) },
			Merge: func(ctx context.Context, a, b string) (string, error) { return s.Merge(a, b) },
		}
	})
}

// clock is a settable clock for WithClock.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func appendT(t *testing.T, s *Stream, keys ...string) []Position {
	t.Helper()
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = Record{PartitionKey: k, Data: []byte(k + "#" + strconv.Itoa(i))}
	}
	pos, err := s.Append(ctxT(t), recs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return pos
}

func shardsT(t *testing.T, s *Stream) map[string]source.Shard {
	t.Helper()
	ss, err := s.Shards(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]source.Shard{}
	for _, sh := range ss {
		m[sh.ID] = sh
	}
	return m
}

func openT(t *testing.T, s *Stream, id, after string) source.ShardReader {
	t.Helper()
	r, err := s.Open(ctxT(t), id, after)
	if err != nil {
		t.Fatalf("Open(%s, %q): %v", id, after, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func headT(t *testing.T, s *Stream, id string) string {
	t.Helper()
	h, err := s.Head(ctxT(t), id)
	if err != nil {
		t.Fatalf("Head(%s): %v", id, err)
	}
	return h
}

func hashKey(t *testing.T, d string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(d, 10)
	if !ok {
		t.Fatalf("bad hash key %q", d)
	}
	return v
}

// keyIn returns a partition key whose hash key lies in [start, end].
func keyIn(t *testing.T, start, end string) string {
	t.Helper()
	lo, hi := hashKey(t, start), hashKey(t, end)
	for i := 0; i < 1_000_000; i++ {
		k := "k" + strconv.Itoa(i)
		if h := source.HashKey(k); h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
			return k
		}
	}
	t.Fatalf("no key in [%s, %s] among the first million", start, end)
	return ""
}

// readAllT reads shard id from its start until it ends or a Read returns nothing.
func readAllT(t *testing.T, s *Stream, id string) []source.Event {
	t.Helper()
	r := openT(t, s, id, "")
	var evs []source.Event
	for {
		b, err := r.Read(ctxT(t), MaxRead, 0)
		if errors.Is(err, source.ErrShardEnded) {
			return evs
		}
		if err != nil {
			t.Fatalf("Read(%s): %v", id, err)
		}
		if len(b.Events) == 0 {
			return evs
		}
		evs = append(evs, b.Events...)
	}
}

func TestShardID(t *testing.T) {
	for i, want := range map[int]string{0: "shardId-000000000000", 7: "shardId-000000000007", 123456: "shardId-000000123456"} {
		if got := ShardID(i); got != want {
			t.Errorf("ShardID(%d) = %s, want %s", i, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	for _, n := range []int{1, 3, 16} {
		ss, err := New(n).Shards(ctxT(t))
		if err != nil || len(ss) != n {
			t.Fatalf("New(%d).Shards = %d shards, %v", n, len(ss), err)
		}
		for i, s := range ss {
			start, end := source.EvenHashKeyRange(i, n)
			want := source.Shard{ID: ShardID(i), HashKeyStart: start, HashKeyEnd: end}
			if s.ID != want.ID || s.HashKeyStart != start || s.HashKeyEnd != end || s.Closed || len(s.ParentIDs) != 0 {
				t.Errorf("New(%d) shard %d = %+v, want %+v", n, i, s, want)
			}
		}
	}
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", n)
				}
			}()
			New(n)
		}()
	}
}

// TestAppend: routing by MD5 as the even split does, one sequence counter per stream, ArrivalMs
// from the clock, Head.
func TestAppend(t *testing.T) {
	var c clock
	c.ms.Store(1_700_000_000_123)
	s := New(4, WithClock(c.now))
	keys := []string{"a", "abc", "DTW", "LAS", "ORD", "a", "Zürich ✈"}
	pos := appendT(t, s, keys[:3]...)
	c.ms.Add(1000)
	pos = append(pos, appendT(t, s, keys[3:]...)...)
	heads := map[string]string{}
	for i, p := range pos {
		if want := ShardID(source.EvenShardForKey(keys[i], 4)); p.ShardID != want {
			t.Errorf("record %d (%q) on %s, want %s", i, keys[i], p.ShardID, want)
		}
		if want := strconv.Itoa(i + 1); p.Seq != want {
			t.Errorf("record %d has sequence number %s, want %s (one counter per stream)", i, p.Seq, want)
		}
		heads[p.ShardID] = p.Seq
	}
	for i := 0; i < 4; i++ {
		id := ShardID(i)
		if got := headT(t, s, id); got != heads[id] {
			t.Errorf("Head(%s) = %q, want %q", id, got, heads[id])
		}
	}
	var evs []source.Event // of key "a": records 0 and 5
	for _, e := range readAllT(t, s, pos[0].ShardID) {
		if e.PartitionKey == "a" {
			evs = append(evs, e)
		}
	}
	wantMs := []int64{1_700_000_000_123, 1_700_000_001_123}
	if len(evs) != 2 || evs[0].ArrivalMs != wantMs[0] || evs[1].ArrivalMs != wantMs[1] {
		t.Fatalf("events of key a = %+v, want two with ArrivalMs %v", evs, wantMs)
	}
	if e := evs[1]; e.PartitionKey != "a" || e.Seq != "6" || string(e.Data) != "a#2" || e.ShardID != pos[0].ShardID {
		t.Fatalf("second event of key a = %+v", e)
	}
	if _, err := s.Head(ctxT(t), "shardId-000000000004"); !errors.Is(err, source.ErrUnknownShard) {
		t.Fatalf("Head of an unknown shard: err = %v, want ErrUnknownShard", err)
	}
}

func TestAppendInvalid(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		recs []Record
		want error
	}{
		{"empty partition key", context.Background(), []Record{{PartitionKey: "ok"}, {PartitionKey: ""}}, ErrInvalid},
		{"partition key too long", context.Background(), []Record{{PartitionKey: strings.Repeat("k", MaxPartitionKeyLen+1)}}, ErrInvalid},
		{"data too long", context.Background(), []Record{{PartitionKey: "k", Data: make([]byte, MaxDataLen+1)}}, ErrInvalid},
		{"canceled context", canceled, []Record{{PartitionKey: "k"}}, context.Canceled},
		{"longest partition key, in characters", context.Background(), []Record{{PartitionKey: strings.Repeat("✈", MaxPartitionKeyLen)}}, nil},
		{"longest data", context.Background(), []Record{{PartitionKey: "k", Data: make([]byte, MaxDataLen)}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(1)
			pos, err := s.Append(tt.ctx, tt.recs)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Append: err = %v, want %v", err, tt.want)
			}
			wantHead := ""
			if err == nil {
				wantHead = "1"
			} else if pos != nil {
				t.Fatalf("failed Append returned positions %v", pos)
			}
			if h := headT(t, s, ShardID(0)); h != wantHead {
				t.Fatalf("Head after Append = %q, want %q (a failed call appends nothing)", h, wantHead)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	whole0, whole1 := source.EvenHashKeyRange(0, 1)
	half0, half1 := source.EvenHashKeyRange(0, 2)
	upper0, upper1 := source.EvenHashKeyRange(1, 2)
	tests := []struct {
		name string
		at   string // "" = Split (midpoint)
		want [2][2]string
	}{
		{"midpoint", "", [2][2]string{{half0, half1}, {upper0, upper1}}},
		{"at 1", "1", [2][2]string{{"0", "0"}, {"1", whole1}}},
		{"at the last key", whole1, [2][2]string{{"0", new(big.Int).Sub(hashKey(t, whole1), big.NewInt(1)).String()}, {whole1, whole1}}},
		{"at 10^30", "1000000000000000000000000000000", [2][2]string{{"0", "999999999999999999999999999999"}, {"1000000000000000000000000000000", whole1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(1)
			parent := ShardID(0)
			var kids [2]string
			var err error
			if tt.at == "" {
				kids, err = s.Split(parent)
			} else {
				kids, err = s.SplitAt(parent, tt.at)
			}
			if err != nil {
				t.Fatal(err)
			}
			if kids != [2]string{ShardID(1), ShardID(2)} {
				t.Fatalf("children = %q, want the next two ids", kids)
			}
			byID := shardsT(t, s)
			if p := byID[parent]; !p.Closed || p.HashKeyStart != whole0 || p.HashKeyEnd != whole1 {
				t.Fatalf("parent after the split = %+v, want closed with its range", p)
			}
			for i, id := range kids {
				c := byID[id]
				if c.Closed || !slices.Equal(c.ParentIDs, []string{parent}) || c.HashKeyStart != tt.want[i][0] || c.HashKeyEnd != tt.want[i][1] {
					t.Errorf("child %d = %+v, want open, ParentIDs [%s], range %v", i, c, parent, tt.want[i])
				}
				// Both ends of the child's range route to the child.
				for _, h := range []string{c.HashKeyStart, c.HashKeyEnd} {
					s.mu.Lock()
					got := s.route(hashKey(t, h)).id
					s.mu.Unlock()
					if got != id {
						t.Errorf("hash key %s routes to %s, want child %s", h, got, id)
					}
				}
				if tt.at == "" { // and so do keys (the other ranges are too small to find one)
					k := keyIn(t, c.HashKeyStart, c.HashKeyEnd)
					if pos := appendT(t, s, k); pos[0].ShardID != id {
						t.Errorf("key %q (hash %s) went to %s, want child %s", k, source.HashKey(k), pos[0].ShardID, id)
					}
				}
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	_, end := source.EvenHashKeyRange(0, 2)
	tests := []struct {
		name    string
		shard   string
		at      string // "-" = Split
		want    error
		prepare func(s *Stream) error
	}{
		{"unknown shard", "shardId-000000000009", "-", source.ErrUnknownShard, nil},
		{"not an id", "shard-0", "-", source.ErrUnknownShard, nil},
		{"closed shard", ShardID(0), "-", ErrShardClosed, func(s *Stream) error { _, err := s.Split(ShardID(0)); return err }},
		{"merged-away shard", ShardID(0), "-", ErrShardClosed, func(s *Stream) error { _, err := s.Merge(ShardID(0), ShardID(1)); return err }},
		{"at the start", ShardID(0), "0", ErrInvalid, nil},
		{"past the end", ShardID(0), new(big.Int).Add(hashKey(t, end), big.NewInt(1)).String(), ErrInvalid, nil},
		{"empty", ShardID(0), "", ErrInvalid, nil},
		{"not decimal", ShardID(0), "0x10", ErrInvalid, nil},
		{"signed", ShardID(0), "+10", ErrInvalid, nil},
		{"negative", ShardID(0), "-10", ErrInvalid, nil},
		{"single-key range", ShardID(3), "-", ErrInvalid, func(s *Stream) error { _, err := s.SplitAt(ShardID(0), end); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(2)
			if tt.prepare != nil {
				if err := tt.prepare(s); err != nil {
					t.Fatal(err)
				}
			}
			before := shardsT(t, s)
			var err error
			if tt.at == "-" {
				_, err = s.Split(tt.shard)
			} else {
				_, err = s.SplitAt(tt.shard, tt.at)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if after := shardsT(t, s); len(after) != len(before) {
				t.Fatalf("a refused split changed the shards: %d -> %d", len(before), len(after))
			}
		})
	}
}

func TestMerge(t *testing.T) {
	s := New(3)
	a, b, c := ShardID(0), ShardID(1), ShardID(2)
	tests := []struct {
		name string
		x, y string
		want error
	}{
		{"itself", a, a, ErrInvalid},
		{"unknown", a, "shardId-000000000099", source.ErrUnknownShard},
		{"unknown first", "nope", a, source.ErrUnknownShard},
		{"not adjacent", a, c, ErrNotAdjacent},
		{"not adjacent, reversed", c, a, ErrNotAdjacent},
	}
	for _, tt := range tests {
		if _, err := s.Merge(tt.x, tt.y); !errors.Is(err, tt.want) {
			t.Errorf("%s: Merge(%s, %s): err = %v, want %v", tt.name, tt.x, tt.y, err, tt.want)
		}
	}
	if n := len(shardsT(t, s)); n != 3 {
		t.Fatalf("refused merges changed the shards: %d listed", n)
	}
	child, err := s.Merge(c, b) // the upper shard first: ParentIDs keep the caller's order
	if err != nil {
		t.Fatal(err)
	}
	byID := shardsT(t, s)
	m := byID[child]
	if child != ShardID(3) || m.Closed || !slices.Equal(m.ParentIDs, []string{c, b}) ||
		m.HashKeyStart != byID[b].HashKeyStart || m.HashKeyEnd != byID[c].HashKeyEnd {
		t.Fatalf("Merge(%s, %s) = %s %+v; want %s, open, ParentIDs [%s %s], over [%s, %s]",
			c, b, child, m, ShardID(3), c, b, byID[b].HashKeyStart, byID[c].HashKeyEnd)
	}
	if !byID[b].Closed || !byID[c].Closed || byID[a].Closed {
		t.Fatalf("after the merge: %+v", byID)
	}
	if _, err := s.Merge(a, b); !errors.Is(err, ErrShardClosed) {
		t.Fatalf("Merge with a closed shard: err = %v, want ErrShardClosed", err)
	}
	for _, k := range []string{keyIn(t, byID[b].HashKeyStart, byID[b].HashKeyEnd), keyIn(t, byID[c].HashKeyStart, byID[c].HashKeyEnd)} {
		if pos := appendT(t, s, k); pos[0].ShardID != child {
			t.Errorf("key %q went to %s, want the merged child %s", k, pos[0].ShardID, child)
		}
	}
	// Adjacent again: the child and shard 0.
	if _, err := s.Merge(a, child); err != nil {
		t.Fatalf("Merge(%s, %s): %v", a, child, err)
	}
}

// TestSequenceAcrossReshard: a key's numbers keep increasing from parent to child to grandchild.
func TestSequenceAcrossReshard(t *testing.T) {
	s := New(2)
	// DTW's hash key is 0xd1bef49a... (0.82 of the range): shard 1 of 2; after shard 1 splits, its
	// upper child 3; after 2 and 3 merge, shard 4.
	steps := []struct {
		shard  string
		change func() error
	}{
		{ShardID(1), func() error { _, err := s.Split(ShardID(1)); return err }},
		{ShardID(3), func() error { _, err := s.Merge(ShardID(2), ShardID(3)); return err }},
		{ShardID(4), nil},
	}
	var seqs []string
	for _, st := range steps {
		for _, p := range appendT(t, s, "DTW", "a", "DTW") {
			if p.ShardID == st.shard {
				seqs = append(seqs, p.Seq)
			}
		}
		if st.change != nil {
			if err := st.change(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seqs) != 6 {
		t.Fatalf("%d of 6 records of DTW on the expected shards", len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if source.CompareSeq(seqs[i], seqs[i-1]) <= 0 {
			t.Fatalf("sequence numbers of DTW = %v; want increasing", seqs)
		}
	}
}

func TestOpenAfter(t *testing.T) {
	s := New(2)
	pos := appendT(t, s, "a", "abc", "a", "a", "abc")
	shA, shB := pos[0].ShardID, pos[1].ShardID
	if shA == shB {
		t.Fatalf("keys a and abc on one shard %s; the test needs two", shA)
	}
	tests := []struct {
		name, shard, after string
		want               []string // sequence numbers read
		err                error
	}{
		{"start", shA, "", []string{"1", "3", "4"}, nil},
		{"after the first", shA, "1", []string{"3", "4"}, nil},
		{"after the last", shA, "4", nil, nil},
		{"leading zeros", shA, "0003", []string{"4"}, nil},
		{"seq of another shard", shA, "2", nil, ErrInvalid},
		{"beyond the head", shA, "6", nil, ErrInvalid},
		{"zero", shA, "0", nil, ErrInvalid},
		{"not a number", shA, "x", nil, ErrInvalid},
		{"negative", shA, "-1", nil, ErrInvalid},
		{"unknown shard", "shardId-000000000002", "", nil, source.ErrUnknownShard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.Open(ctxT(t), tt.shard, tt.after)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Open: err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			defer r.Close()
			b, err := r.Read(ctxT(t), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range b.Events {
				got = append(got, e.Seq)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("read %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadLag: EventsBehind exact, MillisBehind from the clock, max bounds.
func TestReadLag(t *testing.T) {
	var c clock
	c.ms.Store(10_000)
	s := New(1, WithClock(c.now))
	appendT(t, s, "a", "b", "c")
	c.ms.Store(10_500)
	appendT(t, s, "d", "e")
	c.ms.Store(12_000)
	r := openT(t, s, ShardID(0), "")
	tests := []struct {
		max                      int
		n                        int
		eventsBehind, millisBack int64
	}{
		{2, 2, 3, 2000},
		{2, 2, 1, 1500},
		{-1, 1, 0, 0}, // max <= 0: DefaultReadMax
		{5, 0, 0, 0},
	}
	for i, tt := range tests {
		b, err := r.Read(ctxT(t), tt.max, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) != tt.n || b.EventsBehind != tt.eventsBehind || b.MillisBehind != tt.millisBack {
			t.Fatalf("read %d (max %d): %d events, EventsBehind %d, MillisBehind %d; want %d, %d, %d",
				i, tt.max, len(b.Events), b.EventsBehind, b.MillisBehind, tt.n, tt.eventsBehind, tt.millisBack)
		}
	}
	// A clock behind the arrival time gives 0, not a negative lag.
	r2 := openT(t, s, ShardID(0), "")
	c.ms.Store(0)
	if b, err := r2.Read(ctxT(t), 1, 0); err != nil || b.MillisBehind != 0 || b.EventsBehind != 4 {
		t.Fatalf("read with the clock before the arrivals = %+v, %v; want MillisBehind 0, EventsBehind 4", b, err)
	}
}

func TestReadMaxBounds(t *testing.T) {
	s := New(1)
	recs := make([]Record, MaxRead+DefaultReadMax+5)
	for i := range recs {
		recs[i] = Record{PartitionKey: "k"}
	}
	if _, err := s.Append(ctxT(t), recs); err != nil {
		t.Fatal(err)
	}
	r := openT(t, s, ShardID(0), "")
	for _, tt := range []struct{ max, want int }{{MaxRead + 100, MaxRead}, {0, DefaultReadMax}, {3, 3}, {-1, 2}} {
		b, err := r.Read(ctxT(t), tt.max, 0)
		if err != nil || len(b.Events) != tt.want {
			t.Fatalf("Read(max %d) = %d events, %v; want %d", tt.max, len(b.Events), err, tt.want)
		}
	}
}

// TestReadWakes: a waiting Read returns at the append or close of its shard, long before its
// wait ends.
func TestReadWakes(t *testing.T) {
	tests := []struct {
		name    string
		shards  int
		change  func(s *Stream) error
		wantErr error
	}{
		{"append", 1, func(s *Stream) error {
			_, err := s.Append(context.Background(), []Record{{PartitionKey: "k"}})
			return err
		}, nil},
		{"split", 1, func(s *Stream) error { _, err := s.Split(ShardID(0)); return err }, source.ErrShardEnded},
		{"merge", 2, func(s *Stream) error { _, err := s.Merge(ShardID(0), ShardID(1)); return err }, source.ErrShardEnded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.shards)
			r := openT(t, s, ShardID(0), "")
			type result struct {
				b   source.Batch
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			ctx := ctxT(t)
			go func() {
				b, err := r.Read(ctx, 10, time.Minute)
				done <- result{b, err}
			}()
			time.Sleep(50 * time.Millisecond)
			select {
			case res := <-done:
				t.Fatalf("Read returned %+v before any change", res)
			default:
			}
			if err := tt.change(s); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-done:
				if !errors.Is(res.err, tt.wantErr) || (tt.wantErr == nil && len(res.b.Events) != 1) {
					t.Fatalf("Read = %+v, %v; want one event or %v", res.b, res.err, tt.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Read with a 1-minute wait did not return within 10 s of the %s (started %v ago)", tt.name, time.Since(start))
			}
		})
	}
}

func TestReadEndsAfterLastBatch(t *testing.T) {
	s := New(1)
	appendT(t, s, "a", "b", "c")
	if _, err := s.Split(ShardID(0)); err != nil {
		t.Fatal(err)
	}
	r := openT(t, s, ShardID(0), "")
	b, err := r.Read(ctxT(t), 2, time.Minute)
	if err != nil || len(b.Events) != 2 || b.EventsBehind != 1 {
		t.Fatalf("first read = %+v, %v; want 2 events, 1 behind", b, err)
	}
	b, err = r.Read(ctxT(t), 2, time.Minute)
	if err != nil || len(b.Events) != 1 || b.EventsBehind != 0 {
		t.Fatalf("second read = %+v, %v; want the last event without an error", b, err)
	}
	for i := 0; i < 2; i++ {
		start := time.Now()
		if _, err := r.Read(ctxT(t), 2, time.Minute); !errors.Is(err, source.ErrShardEnded) {
			t.Fatalf("read at the end: err = %v, want ErrShardEnded", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("ErrShardEnded took %v; want it without waiting", el)
		}
	}
}

func TestReaderClose(t *testing.T) {
	s := New(1)
	appendT(t, s, "a")
	r := openT(t, s, ShardID(0), "")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctxT(t), 1, 0); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("Read after Close: err = %v, want ErrReaderClosed", err)
	}
}

// TestDataCopied: neither the appender's buffer nor a reader's events alias the stored data.
func TestDataCopied(t *testing.T) {
	s := New(1)
	buf := []byte("original")
	if _, err := s.Append(ctxT(t), []Record{{PartitionKey: "k", Data: buf}, {PartitionKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXX")
	b, err := openT(t, s, ShardID(0), "").Read(ctxT(t), 10, 0)
	if err != nil || len(b.Events) != 2 {
		t.Fatalf("Read = %+v, %v", b, err)
	}
	if b.Events[1].Data == nil {
		t.Fatalf("nil Data read back as nil; want empty, non-nil")
	}
	b.Events[0].Data[0] = 'Y'
	b, err = openT(t, s, ShardID(0), "").Read(ctxT(t), 10, 0)
	if err != nil || !bytes.Equal(b.Events[0].Data, []byte("original")) {
		t.Fatalf("stored data = %q, %v; want %q", b.Events[0].Data, err, "original")
	}
}

// TestConcurrentReshard: racing changes of one shard: exactly one wins, the others get
// ErrShardClosed, and appends during them all land on open shards.
func TestConcurrentReshard(t *testing.T) {
	s := New(2)
	const racers = 8
	var wg sync.WaitGroup
	var wins atomic.Int32
	errs := make(chan error, racers)
	stopAppend := make(chan struct{})
	var appended atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopAppend:
				return
			default:
			}
			changed := wins.Load() > 0 // a change of shard 0 returned before this append began
			pos, err := s.Append(context.Background(), []Record{{PartitionKey: fmt.Sprint("k", i)}})
			if err != nil {
				t.Errorf("Append: %v", err)
				return
			}
			if changed && pos[0].ShardID == ShardID(0) {
				t.Errorf("record %s appended to %s after it closed", pos[0].Seq, pos[0].ShardID)
			}
			appended.Add(1)
		}
	}()
	var rwg sync.WaitGroup
	for i := 0; i < racers; i++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var err error
			if i%2 == 0 {
				_, err = s.Split(ShardID(0))
			} else {
				_, err = s.Merge(ShardID(0), ShardID(1))
			}
			if err == nil {
				wins.Add(1)
			}
			errs <- err
		}()
	}
	rwg.Wait()
	close(stopAppend)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ErrShardClosed) {
			t.Errorf("losing change: err = %v, want ErrShardClosed", err)
		}
	}
	if wins.Load() != 1 {
		t.Fatalf("%d changes of shard 0 succeeded, want 1", wins.Load())
	}
	total := int64(0)
	for id := range shardsT(t, s) {
		total += int64(len(readAllT(t, s, id)))
	}
	if total != appended.Load() {
		t.Fatalf("shards hold %d records, %d were appended", total, appended.Load())
	}
}
