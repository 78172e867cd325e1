package journal

import (
	"context"
	"fmt"
	"testing"
	"time"
)

var airports = []string{"ATL", "ORD", "DFW", "DEN", "LAX", "SFO", "PHX", "IAH", "LAS", "DTW",
	"MSP", "EWR", "SLC", "BOS", "CLT", "LGA", "MCO", "BWI", "SEA", "JFK", "PHL", "MDW", "CVG", "DCA",
	"IAD", "FLL", "SAN", "TPA", "MIA", "STL"}

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

// BenchmarkAppend appends ~90-byte events to 16 shards, 1000 per call (one transaction each):
// on the shards Create made (routed by the even split) and on 16 open shards made by splitting
// 8 of them in two and merging 8 pairs (routed by a search of the open shards' ranges, after 24
// closed ones). Reports events/s.
func BenchmarkAppend(b *testing.B) {
	b.Run("created", func(b *testing.B) { benchAppend(b, create(b, b.TempDir(), 16)) })
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
	evs := flightEvents(1000)
	ctx := context.Background()
	b.SetBytes(int64(len(evs[0].Data)) * int64(len(evs)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := j.Append(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(evs))/time.Since(start).Seconds(), "events/s")
}

// BenchmarkRead reads 16 shards of ~90-byte events in seq order, 1000 per Read, on one reader
// at a time. Reports events/s.
func BenchmarkRead(b *testing.B) {
	const total = 160_000
	j := create(b, b.TempDir(), 16)
	ctx := context.Background()
	evs := flightEvents(total)
	if _, err := j.Append(ctx, evs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	n := 0
	for i := 0; i < b.N; i++ {
		for s := 0; s < 16; s++ {
			r, err := j.Open(ctx, ShardID(s), "")
			if err != nil {
				b.Fatal(err)
			}
			for {
				batch, err := r.Read(ctx, 1000, 0)
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
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}
