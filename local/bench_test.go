package local

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
)

// BenchmarkCommit commits batches of 100 document puts (~60-byte JSON, 30 distinct keys, as a
// per-airport aggregate would) together with the cursor. Reports mutations/s.
func BenchmarkCommit(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Cursors().Claim(ctx, "bench", "shardId-000000000000", 1); err != nil {
		b.Fatal(err)
	}
	ms := make([]readmodel.Mutation, 100)
	for i := range ms {
		ms[i] = readmodel.Mutation{Collection: "airports", Key: fmt.Sprintf("K%02d", i%30),
			Doc: fmt.Appendf(nil, `{"count":%d,"delay":{"sum":%d,"max":%d}}`, i, i*40, i%300)}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		w := readmodel.Write{Projection: "bench", ShardID: "shardId-000000000000", Epoch: 1, Seq: strconv.Itoa(i + 1), Mutations: ms}
		if err := s.ReadModels().Commit(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ms))/time.Since(start).Seconds(), "mutations/s")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// BenchmarkLeaseUpdate measures conditional lease updates (renewals).
func BenchmarkLeaseUpdate(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	l := leaseFor("bench")
	if err := s.Leases().Create(ctx, l); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if l, err = s.Leases().Update(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

func leaseFor(proj string) shardmap.Lease {
	return shardmap.Lease{Projection: proj, ShardID: "shardId-000000000000", Owner: "w", State: shardmap.StateActive}
}

// BenchmarkLeaseUpdateWhileCommitting measures renewals while 8 shards commit batches of 300
// documents back to back in the same process (the load of a busy worker). Reports the
// latency of a lease update: median, 99th percentile and maximum.
func BenchmarkLeaseUpdateWhileCommitting(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		shard := fmt.Sprintf("shardId-%012d", g)
		if _, err := s.Cursors().Claim(ctx, "bench", shard, 1); err != nil {
			b.Fatal(err)
		}
		ms := make([]readmodel.Mutation, 300)
		for i := range ms {
			ms[i] = readmodel.Mutation{Collection: "airports", Key: fmt.Sprintf("%s-K%03d", shard, i),
				Doc: fmt.Appendf(nil, `{"count":%d,"delay":{"sum":%d,"max":%d}}`, i, i*40, i%300)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; ctx.Err() == nil; seq++ {
				w := readmodel.Write{Projection: "bench", ShardID: shard, Epoch: 1, Seq: strconv.Itoa(seq), Mutations: ms}
				if err := s.ReadModels().Commit(ctx, w); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	l := leaseFor("bench")
	if err := s.Leases().Create(ctx, l); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if l, err = s.Leases().Update(ctx, l); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}

// BenchmarkLeaseRenewRound renews shardmap.MaxBatch leases, one Update each ("one-by-one") or
// in one UpdateMany ("batched"), as a lease round of a worker with many shards does. Reports
// the time of renewing 1000 leases.
func BenchmarkLeaseRenewRound(b *testing.B) {
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "one-by-one", true: "batched"}[batched]
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			ls := make([]shardmap.Lease, shardmap.MaxBatch)
			for i := range ls {
				ls[i] = shardmap.Lease{Projection: "bench", ShardID: fmt.Sprintf("shardId-%012d", i), Owner: "w", Module: "sha256:00", State: shardmap.StateActive}
				if err := s.Leases().Create(ctx, ls[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if batched {
					res, err := s.Leases().UpdateMany(ctx, ls)
					if err != nil {
						b.Fatal(err)
					}
					for i, r := range res {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
						ls[i] = r.Lease
					}
					continue
				}
				for i := range ls {
					if ls[i], err = s.Leases().Update(ctx, ls[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N)*1000/float64(len(ls)), "ms/1000-leases")
		})
	}
}
