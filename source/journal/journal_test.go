package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/sourcetest"
	"github.com/projhost/projhost/wasmabi"
)

func create(t testing.TB, dir string, shards int, opts ...Option) *Journal {
	t.Helper()
	j, err := Create(dir, shards, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func appender(j *Journal) sourcetest.Appender {
	return func(ctx context.Context, recs []sourcetest.Record) error {
		evs := make([]AppendEvent, len(recs))
		for i, r := range recs {
			evs[i] = AppendEvent{PartitionKey: r.PartitionKey, Data: r.Data}
		}
		_, err := j.Append(ctx, evs)
		return err
	}
}

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
		j := create(t, t.TempDir(), shards, WithPollInterval(5*time.Millisecond))
		return j, appender(j)
	})
}

// TestConformanceSecondHandle reads through a second handle on the same file (as another process
// would) while appending through the first.
func TestConformanceSecondHandle(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
		dir := t.TempDir()
		w := create(t, dir, shards)
		return openSecond(t, dir), appender(w)
	})
}

// openSecond opens a second handle on dir's journal, polling every 5 ms, closed when t ends.
func openSecond(t *testing.T, dir string) *Journal {
	t.Helper()
	r, err := Open(dir, WithPollInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestShardFor(t *testing.T) {
	// MD5 values from RFC 1321 A.5; origins of the flights data set.
	tests := []struct {
		key    string
		shards int
		want   int
	}{
		{"", 16, 13},     // d41d8cd9...
		{"a", 16, 0},     // 0cc175b9...
		{"abc", 16, 9},   // 90015098...
		{"abc", 3, 1},    // 0x90/0x100*3 = 1.69
		{"abc", 1, 0},    // one shard holds everything
		{"DTW", 16, 13},  // d1bef49a... (md5sum)
		{"LAS", 16, 15},  // f1f5aace...
		{"LAS", 2, 1},    // upper half
		{"DTW", 4, 3},    // 0xd1 / 0x40 = 3.3
		{"ORD", 16, 12},  // c23431d0...
		{"ORD", 100, 75}, // 0xc23431d0/2^32*100 = 75.9
	}
	for _, tt := range tests {
		if got := ShardFor(tt.key, tt.shards); got != tt.want {
			t.Errorf("ShardFor(%q, %d) = %d, want %d (md5 %s)", tt.key, tt.shards, got, tt.want, source.HashKey(tt.key).Text(16))
		}
	}
}

func TestShardID(t *testing.T) {
	tests := []struct {
		id   string
		want int
		ok   bool
	}{
		{"shardId-000000000000", 0, true},
		{"shardId-000000000015", 15, true},
		{"shardId-999999999999", 999999999999, true}, // whether it exists is the layout's question
		{"shardId-00000000001", 0, false},
		{"shardId-0000000000001", 0, false},
		{"shardid-000000000001", 0, false},
		{"shardId-00000000000a", 0, false},
		{"shardId-99999999999999", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseShardID(tt.id)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseShardID(%q) = %d, %v; want %d, %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
	if got := ShardID(7); got != "shardId-000000000007" {
		t.Fatalf("ShardID(7) = %s", got)
	}
}

func FuzzParseShardID(f *testing.F) {
	for _, s := range []string{"shardId-000000000000", "shardId-000000000015", "shardId-x", "", "shardId-999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		i, ok := parseShardID(id)
		if ok && (i < 0 || ShardID(i) != id) {
			t.Fatalf("parseShardID(%q) = %d, which does not round-trip", id, i)
		}
		if !ok && i != 0 {
			t.Fatalf("parseShardID(%q) failed but returned %d", id, i)
		}
	})
}

func FuzzParseSeq(f *testing.F) {
	for _, s := range []string{"1", "0", "9223372036854775807", "9223372036854775808", "-1", "+1", "", "1e3", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSeq(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("parseSeq(%q) error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if v < 0 || source.CompareSeq(strconv.FormatInt(v, 10), s) != 0 {
			t.Fatalf("parseSeq(%q) = %d", s, v)
		}
	})
}

func TestCreateOpen(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of an empty dir: err = %v, want fs.ErrNotExist", err)
	}
	for _, n := range []int{0, -1, MaxShards + 1} {
		if _, err := Create(dir, n); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Create with %d shards: err = %v, want ErrInvalid", n, err)
		}
	}
	j := create(t, dir, 5)
	if _, err := j.Append(context.Background(), []AppendEvent{{PartitionKey: "a", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, 4); !errors.Is(err, ErrShardCount) {
		t.Fatalf("Create with another count: err = %v, want ErrShardCount", err)
	}
	again := create(t, dir, 5) // same count: opens
	o, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.ShardCount() != 5 || again.ShardCount() != 5 {
		t.Fatalf("shard counts %d, %d; want 5", o.ShardCount(), again.ShardCount())
	}
	h, err := o.Head(context.Background(), ShardID(ShardFor("a", 5)))
	if err != nil || h != "1" {
		t.Fatalf("Head = %q, %v; want 1", h, err)
	}
}

func TestAppendPositionsAndHead(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 4)
	var evs []AppendEvent
	for i := 0; i < 2500; i++ { // three transactions
		evs = append(evs, AppendEvent{PartitionKey: fmt.Sprintf("k%d", i%50), Data: []byte(strconv.Itoa(i))})
	}
	pos, err := j.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != len(evs) {
		t.Fatalf("%d positions for %d events", len(pos), len(evs))
	}
	next := map[string]int64{}
	for i, p := range pos {
		if want := ShardID(ShardFor(evs[i].PartitionKey, 4)); p.ShardID != want {
			t.Fatalf("event %d on %s, want %s", i, p.ShardID, want)
		}
		next[p.ShardID]++
		if p.Seq != strconv.FormatInt(next[p.ShardID], 10) {
			t.Fatalf("event %d: seq %s, want %d (1, 2, 3... per shard)", i, p.Seq, next[p.ShardID])
		}
	}
	for s := 0; s < 4; s++ {
		h, err := j.Head(ctx, ShardID(s))
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if next[ShardID(s)] > 0 {
			want = strconv.FormatInt(next[ShardID(s)], 10)
		}
		if h != want {
			t.Fatalf("Head(%d) = %q, want %q", s, h, want)
		}
	}
	if _, err := j.Head(ctx, "shardId-000000000004"); !errors.Is(err, source.ErrUnknownShard) {
		t.Fatalf("Head of an unknown shard: %v", err)
	}
	// Read back one shard with positions, data and arrival time.
	r, err := j.Open(ctx, ShardID(1), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Read(ctx, 5000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b.Events)) != next[ShardID(1)] || b.EventsBehind != 0 || b.MillisBehind != 0 {
		t.Fatalf("read %d events (behind %d, %d ms), want %d and caught up", len(b.Events), b.EventsBehind, b.MillisBehind, next[ShardID(1)])
	}
	now := time.Now().UnixMilli()
	k := 0
	for i, p := range pos {
		if p.ShardID != ShardID(1) {
			continue
		}
		e := b.Events[k]
		k++
		if e.Seq != p.Seq || string(e.Data) != strconv.Itoa(i) || e.PartitionKey != evs[i].PartitionKey {
			t.Fatalf("event %+v, want seq %s data %d", e, p.Seq, i)
		}
		if e.ArrivalMs < now-60_000 || e.ArrivalMs > now {
			t.Fatalf("ArrivalMs %d, now %d", e.ArrivalMs, now)
		}
	}
}

func TestAppendInvalid(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 2)
	long := string(make([]rune, 257))
	for _, evs := range [][]AppendEvent{
		{{PartitionKey: "", Data: []byte("x")}},
		{{PartitionKey: "ok", Data: []byte("x")}, {PartitionKey: long}},
		{{PartitionKey: "ok", Data: make([]byte, MaxDataLen+1)}},
	} {
		if _, err := j.Append(ctx, evs); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Append: err = %v, want ErrInvalid", err)
		}
	}
	for s := 0; s < 2; s++ {
		if h, _ := j.Head(ctx, ShardID(s)); h != "" {
			t.Fatalf("refused append wrote to shard %d (head %s)", s, h)
		}
	}
	// nil data is stored as empty.
	pos, err := j.Append(ctx, []AppendEvent{{PartitionKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := j.Open(ctx, pos[0].ShardID, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Read(ctx, 10, 0)
	if err != nil || len(b.Events) != 1 || len(b.Events[0].Data) != 0 {
		t.Fatalf("Read = %+v, %v; want one event with empty data", b.Events, err)
	}
}

// TestAppendPartitionKeyLimit: the journal takes partition keys of 1 to 256 characters, as
// Kinesis does, whatever their UTF-8 width, reads them back intact, and every key it takes can
// be passed to a handler (wasmabi.CheckEvent: at most 1024 bytes).
func TestAppendPartitionKeyLimit(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 2)
	for _, tt := range []struct {
		name, key string
		bytes     int
		err       string // "" when accepted
	}{
		{"one character", "k", 1, ""},
		{"256 ASCII characters", strings.Repeat("k", 256), 256, ""},
		{"256 characters of 2 bytes", strings.Repeat("é", 256), 512, ""},
		{"256 characters of 4 bytes", strings.Repeat("😀", 256), 1024, ""},
		{"empty", "", 0, "event 0: partition key of 0 characters: it must have 1 to 256 characters (the Kinesis limit)"},
		{"257 ASCII characters", strings.Repeat("k", 257), 257, "event 0: partition key of 257 characters: it must have 1 to 256 characters"},
		{"257 characters of 4 bytes", strings.Repeat("😀", 257), 1028, "event 0: partition key of 257 characters: it must have 1 to 256 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.key) != tt.bytes {
				t.Fatalf("key of %d bytes, want %d", len(tt.key), tt.bytes)
			}
			pos, err := j.Append(ctx, []AppendEvent{{PartitionKey: tt.key, Data: []byte(tt.name)}})
			if tt.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Append: err = %v, want ErrInvalid containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := j.Open(ctx, pos[0].ShardID, "")
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.Read(ctx, 100, 0)
			if err != nil || len(b.Events) == 0 || b.Events[len(b.Events)-1].Seq != pos[0].Seq {
				t.Fatalf("Read = %+v, %v; want the event appended last at seq %s", b.Events, err, pos[0].Seq)
			}
			e := b.Events[len(b.Events)-1]
			if e.PartitionKey != tt.key || string(e.Data) != tt.name {
				t.Fatalf("read key %q data %q, want %q %q", e.PartitionKey, e.Data, tt.key, tt.name)
			}
			ae := wasmabi.Event{Seq: []byte(e.Seq), PartitionKey: []byte(e.PartitionKey), Data: e.Data}
			if err := wasmabi.CheckEvent(&ae); err != nil {
				t.Fatalf("an event the journal took cannot be passed to a handler: %v", err)
			}
		})
	}
}

func TestOpenPositions(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 1)
	if _, err := j.Append(ctx, []AppendEvent{{PartitionKey: "a", Data: []byte("1")}, {PartitionKey: "a", Data: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		after string
		want  error
	}{
		{"3", ErrBeyondHead},
		{"x", ErrInvalid},
		{"-1", ErrInvalid},
		{"49590338271490256608559692538361571095921575989136588898", ErrInvalid},
		{"2", nil},
		{"0", nil},
	} {
		r, err := j.Open(ctx, ShardID(0), tt.after)
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Fatalf("Open after %q: err = %v, want %v", tt.after, err, tt.want)
		}
		if r != nil {
			r.Close()
		}
	}
}

// TestReadBytes: reads are bounded by event data bytes as well as by count: four shards of
// 1 MiB events read with a batch size of 500 hold about one budget per shard, not 500 MiB.
func TestReadBytes(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 4)
	const mib = 1 << 20
	big := make([]AppendEvent, 0, 40)
	for i := range 40 {
		big = append(big, AppendEvent{PartitionKey: strconv.Itoa(i), Data: []byte(strings.Repeat("x", mib))})
	}
	if _, err := j.Append(ctx, big); err != nil {
		t.Fatal(err)
	}
	shards, _ := j.Shards(ctx)
	total := 0
	for _, sh := range shards {
		rd, err := j.Open(ctx, sh.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var last string
		for {
			b, err := rd.Read(ctx, 500, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Events) == 0 {
				break
			}
			size := 0
			for _, e := range b.Events {
				size += len(e.Data)
				if source.CompareSeq(e.Seq, last) <= 0 {
					t.Fatalf("%s: seq %s after %s", sh.ID, e.Seq, last)
				}
				last = e.Seq
			}
			if size > DefaultReadBytes {
				t.Fatalf("%s: a read of %d events holds %d bytes, over DefaultReadBytes %d", sh.ID, len(b.Events), size, DefaultReadBytes)
			}
			if size+mib <= DefaultReadBytes && b.EventsBehind > 0 {
				t.Fatalf("%s: a read stopped at %d bytes with room for another event", sh.ID, size)
			}
			total += len(b.Events)
		}
	}
	if total != 40 {
		t.Fatalf("read %d events in all, want 40", total)
	}

	// ReadBytes: the bound given; an event larger than it comes alone.
	rd, err := j.Open(ctx, shards[0].ID, "")
	if err != nil {
		t.Fatal(err)
	}
	br := rd.(source.ByteBoundedReader)
	for _, c := range []struct{ maxBytes, want int }{{1, 1}, {mib / 2, 1}, {2*mib - 1, 1}, {2 * mib, 2}, {0, 4}} {
		b, err := br.ReadBytes(ctx, 500, c.maxBytes, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) != c.want && b.EventsBehind > 0 {
			t.Errorf("ReadBytes(maxBytes %d) = %d events, want %d", c.maxBytes, len(b.Events), c.want)
		}
	}
}
