package shardmap_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
)

// TestConcurrentRealTime runs several managers on real goroutines and the real monotonic
// clock with a 200 ms lease while workers join, die (stop renewing) and leave gracefully. A
// checker samples every manager's Valid for every shard continuously.
//
// Invariants: no (shard, epoch) is ever acquired twice; no two managers are ever valid on one
// shard with the same epoch; with stealing off, no two managers are ever valid on one shard at
// all (expiry is measured from after the owner's last renewal, and Release stops being valid
// before the lease is free). With stealing on, overlaps exist by design (the victim learns at
// its next renewal) and fencing covers them; they must have different epochs.
func TestConcurrentRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time test")
	}
	tests := []struct {
		name     string
		steals   int
		strict   bool
		balanced bool // the final three workers hold 6/5/5
	}{
		{"stealing on", 1, false, true},
		{"stealing off", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runConcurrent(t, tt.steals, tt.strict, tt.balanced) })
	}
}

type shardEpoch struct {
	shard string
	epoch int64
}

type node struct {
	id      string
	m       *shardmap.Manager
	cancel  context.CancelFunc
	stopped chan struct{}

	mu   sync.Mutex
	held map[string]int64 // from events: Acquired adds, Lost and a successful Release remove
}

func runConcurrent(t *testing.T, steals int, strict, balanced bool) {
	const (
		lease  = 200 * time.Millisecond
		shards = 16
	)
	backing := memlease.New()
	ctx := context.Background()
	if err := shardmap.NewManager(backing, proj, "setup", shardmap.WithLogger(quiet)).EnsureShards(ctx, shardList(shards)); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, shards)
	for i, s := range shardList(shards) {
		ids[i] = s.ID
	}

	var (
		mu         sync.Mutex
		acquiredBy = map[shardEpoch]string{}
		nodes      []*node
		handoffs   sync.WaitGroup
	)
	start := func(id string) *node {
		n := &node{id: id, stopped: make(chan struct{}), held: map[string]int64{}}
		ev := shardmap.Events{
			Acquired: func(shard string, l shardmap.Lease, _, _ string) {
				mu.Lock()
				if prev, dup := acquiredBy[shardEpoch{shard, l.Epoch}]; dup {
					t.Errorf("%s acquired %s epoch %d, already acquired by %s", id, shard, l.Epoch, prev)
				}
				acquiredBy[shardEpoch{shard, l.Epoch}] = id
				mu.Unlock()
				n.mu.Lock()
				n.held[shard] = l.Epoch
				n.mu.Unlock()
			},
			Lost: func(shard, _ string) {
				n.mu.Lock()
				delete(n.held, shard)
				n.mu.Unlock()
			},
			ReleaseRequested: func(shard string) {
				handoffs.Add(1)
				go func() { // the runner finishes its batch and saves the cursor first
					defer handoffs.Done()
					time.Sleep(5 * time.Millisecond)
					if err := n.m.Release(ctx, shard); err == nil {
						n.mu.Lock()
						delete(n.held, shard)
						n.mu.Unlock()
					} else if !errors.Is(err, shardmap.ErrNotOwned) && !errors.Is(err, shardmap.ErrConflict) {
						t.Errorf("%s: release %s: %v", id, shard, err)
					}
				}()
			},
		}
		n.m = shardmap.NewManager(backing, proj, id, shardmap.WithLeaseDuration(lease),
			shardmap.WithMaxStealsPerRound(steals), shardmap.WithLogger(quiet), shardmap.WithEvents(ev))
		rctx, cancel := context.WithCancel(ctx)
		n.cancel = cancel
		go func() { defer close(n.stopped); _ = n.m.Run(rctx) }()
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return n
	}

	// Checker: three passes over all managers per shard; a manager valid with the same epoch
	// in the first and third pass was valid throughout the second (Valid is monotonic per
	// acquisition), so any other manager valid in the second pass overlapped with it.
	stopCheck := make(chan struct{})
	checked := make(chan int)
	go func() {
		samples, overlaps := 0, 0
		type v struct {
			epoch int64
			ok    bool
		}
		for {
			select {
			case <-stopCheck:
				t.Logf("checker: %d samples, %d overlapping validity pairs (different epochs)", samples, overlaps)
				checked <- samples
				return
			default:
			}
			time.Sleep(200 * time.Microsecond) // leave CPU to the managers
			mu.Lock()
			ns := slices.Clone(nodes)
			mu.Unlock()
			for _, shard := range ids {
				var pass [3][]v
				for p := range pass {
					for _, n := range ns {
						e, ok := n.m.Valid(shard)
						pass[p] = append(pass[p], v{e, ok})
					}
				}
				samples++
				for i := range ns {
					a, c := pass[0][i], pass[2][i]
					if !a.ok || !c.ok || a.epoch != c.epoch {
						continue
					}
					for j := range ns {
						b := pass[1][j]
						if j == i || !b.ok {
							continue
						}
						if b.epoch == a.epoch {
							t.Errorf("%s: %s and %s both valid with epoch %d", shard, ns[i].id, ns[j].id, a.epoch)
						} else if strict {
							t.Errorf("%s: %s (epoch %d) and %s (epoch %d) valid at once with stealing off",
								shard, ns[i].id, a.epoch, ns[j].id, b.epoch)
						}
						overlaps++
					}
				}
			}
		}
	}()

	a := start("a")
	b := start("b")
	c := start("c")
	time.Sleep(600 * time.Millisecond)
	d := start("d")
	time.Sleep(600 * time.Millisecond)
	b.cancel() // dies: no release, leases expire
	<-b.stopped
	time.Sleep(300 * time.Millisecond)
	c.cancel() // graceful: stop, (save cursors), release
	<-c.stopped
	handoffs.Wait()
	if err := c.m.ReleaseAll(ctx); err != nil {
		t.Errorf("c: ReleaseAll: %v", err)
	}
	e := start("e")
	live := []*node{a, d, e}

	// Wait for the survivors to settle: every shard owned by a live worker (and 6/5/5).
	deadline := time.Now().Add(10 * time.Second)
	var counts map[string]int
	for {
		counts = map[string]int{}
		ls, err := backing.List(ctx, proj)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			counts[l.Owner]++
		}
		ok := counts["a"]+counts["d"]+counts["e"] == shards
		if balanced {
			for _, n := range live {
				ok = ok && (counts[n.id] == 5 || counts[n.id] == 6)
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivors did not settle: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("final assignment %v", counts)
	close(stopCheck)
	if n := <-checked; n == 0 {
		t.Fatal("checker took no samples")
	}
	for _, n := range live {
		n.cancel()
		<-n.stopped
	}
	handoffs.Wait()
	// A steal in the last round is only noticed by the victim at its next round.
	for _, n := range live {
		if _, err := n.m.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	handoffs.Wait()

	// The dead and the departed hold nothing valid.
	for _, n := range []*node{b, c} {
		for _, s := range ids {
			if _, ok := n.m.Valid(s); ok {
				t.Errorf("%s (stopped) still valid on %s", n.id, s)
			}
		}
	}
	// Each live manager's events add up to what it owns, which is what the store says.
	ls, err := backing.List(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]shardmap.Lease{}
	for _, l := range ls {
		stored[l.ShardID] = l
	}
	for _, n := range live {
		fromEvents := map[string]int64{}
		n.mu.Lock()
		for s, ep := range n.held {
			fromEvents[s] = ep
		}
		n.mu.Unlock()
		owned := map[string]int64{}
		for _, l := range n.m.Owned() {
			owned[l.ShardID] = l.Epoch
			if s := stored[l.ShardID]; s.Owner != n.id || s.Epoch != l.Epoch {
				t.Errorf("%s owns %s epoch %d; store has %q epoch %d", n.id, l.ShardID, l.Epoch, s.Owner, s.Epoch)
			}
		}
		if fmt.Sprint(fromEvents) != fmt.Sprint(owned) {
			t.Errorf("%s: events say it holds %v, Owned says %v", n.id, fromEvents, owned)
		}
	}
}
