package shardmap_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/projhost/projhost/shardmap"
)

// FuzzConverge drives random clusters (shard count, workers joining at random rounds, steals
// per round, random round order, optionally one worker dying) and checks that the assignment
// settles with every shard owned by a live worker, lease counts within 1 of each other, each
// manager agreeing with the store, and nothing moving during further rounds.
func FuzzConverge(f *testing.F) {
	f.Add(uint8(16), uint8(2), uint8(1), uint64(1), false)
	f.Add(uint8(16), uint8(3), uint8(1), uint64(2), false)
	f.Add(uint8(64), uint8(5), uint8(2), uint64(3), true)
	f.Add(uint8(3), uint8(6), uint8(1), uint64(4), true)
	f.Add(uint8(1), uint8(1), uint8(0), uint64(5), false)
	f.Add(uint8(255), uint8(7), uint8(3), uint64(6), true)
	f.Fuzz(func(t *testing.T, shards, workers, steals uint8, seed uint64, kill bool) {
		n := 1 + int(shards)%100
		w := 1 + int(workers)%7
		s := 1 + int(steals)%3
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		c := newCluster(t, n)
		c.rng = rng
		for i := range w {
			c.add(fmt.Sprintf("w%d", i), shardmap.WithMaxStealsPerRound(s))
			for range rng.IntN(4) {
				c.round()
			}
		}
		if kill && w > 1 {
			c.workers[rng.IntN(w)].dead = true
		}
		c.settle(3*n + 40)
		counts := c.sortedCounts()
		sum := 0
		for _, k := range counts {
			sum += k
		}
		if sum != n || counts[0]-counts[len(counts)-1] > 1 {
			t.Fatalf("%d shards, %d workers (kill %v), %d steals: settled at %v (store %v)", n, w, kill, s, counts, c.counts())
		}
		c.checkConsistent()
		before := c.assignment()
		for range 20 {
			c.round()
		}
		if after := c.assignment(); !mapsEqual(before, after) {
			t.Fatalf("assignment moved after settling: %v", c.counts())
		}
		if !slices.IsSortedFunc(counts, func(a, b int) int { return b - a }) {
			t.Fatal("sortedCounts not sorted")
		}
	})
}

// BenchmarkRound measures one steady-state round of one worker (renew its share, List, plan)
// against memlease and reports lease store calls per round.
func BenchmarkRound(b *testing.B) {
	for _, tt := range []struct{ shards, workers int }{{16, 2}, {256, 8}, {1024, 4}} {
		b.Run(fmt.Sprintf("%dshards_%dworkers", tt.shards, tt.workers), func(b *testing.B) {
			c := newCluster(b, tt.shards)
			for i := range tt.workers {
				c.add(fmt.Sprintf("w%d", i), shardmap.WithMaxStealsPerRound(4))
			}
			c.settle(10 * tt.shards)
			w := c.workers[0]
			w.store.updates.Store(0)
			w.store.lists.Store(0)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				// Every worker renews, so nobody's leases look expired to the others.
				for _, o := range c.workers {
					o.clk.Advance(renew)
					if o == w {
						continue
					}
					if _, err := o.m.Round(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.m.Round(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(w.store.updates.Load())/float64(b.N), "writes/round")
			b.ReportMetric(float64(w.store.lists.Load())/float64(b.N), "lists/round")
		})
	}
}
