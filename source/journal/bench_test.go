package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/projhost/projhost/internal/cpuclock"
	"github.com/projhost/projhost/internal/eventfile"
)

// airports are 300 three-letter codes: the flights data set has 220 origins, enough keys to
// reach every one of 100 shards.
var airports = func() []string {
	codes := make([]string, 300)
	for i := range codes {
		codes[i] = string([]byte{'A' + byte(i/26%26), 'A' + byte(i*7%26), 'A' + byte(i%26)})
	}
	return codes
}()

// flightEvents returns n events shaped like the flights data set (about 90 bytes each,
// partition key = origin).
func flightEvents(n int) []AppendEvent {
	evs := make([]AppendEvent, n)
	for i := range evs {
		o, d := airports[i%len(airports)], airports[(i*7+3)%len(airports)]
		evs[i] = AppendEvent{PartitionKey: o, Data: fmt.Appendf(nil,
			`{"date":"2001/01/%02d %02d:%02d","delay":%d,"distance":%d,"origin":"%s","destination":"%s"}`,
			i%28+1, i%24, i%60, i%300-20, 100+i%2500, o, d)}
	}
	return evs
}

// BenchmarkAppend appends ~90-byte events shaped like the flights data set, in calls of
// TxEvents (one transaction each): to 4 and to 100 shards made by Create (routed by the even
// split), and to 16 open shards made by splitting 8 of 16 in two and merging 8 pairs (routed
// by a search of the open shards' ranges, after 24 closed ones). Reports events/s and the
// process's CPU time per event (user+system, every thread: steadier than wall time on a shared
// machine).
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{4, 100} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) { benchAppend(b, create(b, b.TempDir(), n)) })
	}
	b.Run("resharded", func(b *testing.B) {
		ctx := context.Background()
		j := create(b, b.TempDir(), 16)
		for i := 0; i < 16; i += 2 { // merge 8 pairs: 8 open shards
			if _, err := j.Merge(ctx, ShardID(i), ShardID(i+1)); err != nil {
				b.Fatal(err)
			}
		}
		for i := 16; i < 24; i++ { // split each: 16 open shards
			if _, err := j.Split(ctx, ShardID(i), ""); err != nil {
				b.Fatal(err)
			}
		}
		benchAppend(b, j)
	})
}

func benchAppend(b *testing.B, j *Journal) {
	evs := flightEvents(TxEvents)
	ctx := context.Background()
	b.SetBytes(int64(len(evs[0].Data)) * int64(len(evs)))
	cpu0 := cpuclock.Process()
	for b.Loop() {
		if _, err := j.Append(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	cpuclock.ReportPerEvent(b, b.N*len(evs), cpu0)
}

// BenchmarkAppendFile is `projhost journal append`'s path on 100 shards: plugins/examples'
// flights-20k.json as JSON lines through eventfile.Scan, appended in calls of TxEvents. One op
// is the 20,000 events. Reports events/s and CPU time per event as BenchmarkAppend.
func BenchmarkAppendFile(b *testing.B) {
	arr, err := os.ReadFile("../../plugins/examples/flightdelays/data/flights-20k.json")
	if err != nil {
		b.Fatal(err)
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(arr, &objs); err != nil {
		b.Fatal(err)
	}
	var lines bytes.Buffer
	for _, o := range objs {
		lines.Write(o)
		lines.WriteByte('\n')
	}
	j := create(b, b.TempDir(), 100)
	ctx := context.Background()
	buf := make([]AppendEvent, 0, TxEvents)
	var data []byte
	flush := func() {
		if _, err := j.Append(ctx, buf); err != nil {
			b.Fatal(err)
		}
		buf, data = buf[:0], data[:0]
	}
	b.SetBytes(int64(lines.Len()))
	cpu0 := cpuclock.Process()
	for b.Loop() {
		err := eventfile.Scan(bytes.NewReader(lines.Bytes()), "origin", func(_ int, key string, raw []byte) error {
			at := len(data)
			data = append(data, raw...)
			buf = append(buf, AppendEvent{PartitionKey: key, Data: data[at:len(data):len(data)]})
			if len(buf) == cap(buf) {
				flush()
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(buf) > 0 {
			flush()
		}
	}
	cpuclock.ReportPerEvent(b, b.N*len(objs), cpu0)
}

// BenchmarkRead reads every shard of a journal of ~90-byte events in seq order, on one reader
// at a time: 16 shards of 10,000 events, 1000 per Read; and 100 shards of 1,600, 20 per Read
// (a runner keeping up with a stream reads what arrived since its last read). Reports events/s
// and CPU time per event as BenchmarkAppend.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct{ shards, perShard, max int }{{16, 10_000, 1000}, {100, 1600, 20}} {
		b.Run(fmt.Sprintf("shards=%d/max=%d", c.shards, c.max), func(b *testing.B) {
			total := c.shards * c.perShard
			j := create(b, b.TempDir(), c.shards)
			ctx := context.Background()
			// Calls of 100 events per shard, as an appender streaming into 100 shards makes them.
			for evs := flightEvents(total); len(evs) > 0; {
				n := min(len(evs), 100*c.shards)
				if _, err := j.Append(ctx, evs[:n]); err != nil {
					b.Fatal(err)
				}
				evs = evs[n:]
			}
			n := 0
			cpu0 := cpuclock.Process()
			for b.Loop() {
				for s := 0; s < c.shards; s++ {
					r, err := j.Open(ctx, ShardID(s), "")
					if err != nil {
						b.Fatal(err)
					}
					for {
						batch, err := r.Read(ctx, c.max, 0)
						if err != nil {
							b.Fatal(err)
						}
						n += len(batch.Events)
						if batch.EventsBehind == 0 {
							break
						}
					}
				}
			}
			if n != b.N*total {
				b.Fatalf("read %d events, want %d", n, b.N*total)
			}
			cpuclock.ReportPerEvent(b, n, cpu0)
		})
	}
}
