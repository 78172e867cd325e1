package local

import (
	"context"
	"fmt"
	"strconv"
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
