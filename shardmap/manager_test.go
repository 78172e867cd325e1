package shardmap_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
	"github.com/projhost/projhost/source"
)

func TestBalance(t *testing.T) {
	tests := []struct {
		name       string
		shards     int
		steals     int
		start      []string
		wantStart  []int // descending lease counts after the first settle
		join       []string
		wantJoined []int
		maxRounds  int // rounds allowed for the join to settle
		joinerGets []int
	}{
		{name: "second worker joins a single one", shards: 16, steals: 1, start: []string{"a"}, wantStart: []int{16},
			join: []string{"b"}, wantJoined: []int{8, 8}, maxRounds: 6, joinerGets: []int{8}},
		{name: "second joins, 3 steals per round", shards: 16, steals: 3, start: []string{"a"}, wantStart: []int{16},
			join: []string{"b"}, wantJoined: []int{8, 8}, maxRounds: 3, joinerGets: []int{8}},
		{name: "two start together", shards: 16, steals: 1, start: []string{"a", "b"}, wantStart: []int{8, 8}},
		{name: "third joins 8/8", shards: 16, steals: 1, start: []string{"a", "b"}, wantStart: []int{8, 8},
			join: []string{"c"}, wantJoined: []int{6, 5, 5}, maxRounds: 5, joinerGets: []int{5, 6}},
		{name: "four workers, 10 shards", shards: 10, steals: 1, start: []string{"a", "b", "c", "d"}, wantStart: []int{3, 3, 2, 2}},
		{name: "more workers than shards", shards: 3, steals: 1, start: []string{"a", "b", "c", "d", "e"}, wantStart: []int{1, 1, 1, 0, 0}},
		{name: "stealing disabled: joiner waits", shards: 16, steals: 0, start: []string{"a"}, wantStart: []int{16},
			join: []string{"b"}, wantJoined: []int{16, 0}, maxRounds: 1, joinerGets: []int{0}},
		{name: "two join 64 shards", shards: 64, steals: 2, start: []string{"a", "b"}, wantStart: []int{32, 32},
			join: []string{"c", "d"}, wantJoined: []int{16, 16, 16, 16}, maxRounds: 12, joinerGets: []int{16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, tt.shards)
			for _, id := range tt.start {
				c.add(id, shardmap.WithMaxStealsPerRound(tt.steals))
			}
			r := c.settle(60)
			if got := c.sortedCounts(); !slices.Equal(got, tt.wantStart) {
				t.Fatalf("after start (%d rounds): counts %v, want %v", r, got, tt.wantStart)
			}
			t.Logf("start settled after %d rounds: %v", r, c.counts())
			if len(tt.join) > 0 {
				for _, id := range tt.join {
					c.add(id, shardmap.WithMaxStealsPerRound(tt.steals))
				}
				r := c.settle(60)
				if got := c.sortedCounts(); !slices.Equal(got, tt.wantJoined) {
					t.Fatalf("after join: counts %v, want %v", got, tt.wantJoined)
				}
				if r > tt.maxRounds {
					t.Errorf("join took %d rounds to settle, want <= %d", r, tt.maxRounds)
				}
				counts := c.counts()
				for _, id := range tt.join {
					if !slices.Contains(tt.joinerGets, counts[id]) {
						t.Errorf("joiner %s got %d leases, want one of %v", id, counts[id], tt.joinerGets)
					}
				}
				t.Logf("join settled after %d rounds: %v", r, counts)
			}
			if free := c.counts()[""]; free != 0 && tt.steals > 0 {
				t.Errorf("%d leases left free", free)
			}
			c.checkConsistent()

			// No flapping: many more rounds in random order change nothing and notify nothing.
			before := c.assignment()
			var evBefore []int
			for _, w := range c.workers {
				a, l, r := w.events()
				evBefore = append(evBefore, len(a), len(l), len(r))
			}
			c.rng = rand.New(rand.NewPCG(1, 2))
			for range 200 {
				c.round()
			}
			if after := c.assignment(); !mapsEqual(before, after) {
				t.Errorf("assignment changed during 200 stable rounds: %v -> %v", before, after)
			}
			var evAfter []int
			for _, w := range c.workers {
				a, l, r := w.events()
				evAfter = append(evAfter, len(a), len(l), len(r))
			}
			if !slices.Equal(evBefore, evAfter) {
				t.Errorf("events during stable rounds (acquired, lost, release requested per worker): %v -> %v", evBefore, evAfter)
			}
			c.checkConsistent()
		})
	}
}

func TestDeadWorkerLeasesTakenAfterDuration(t *testing.T) {
	c := newCluster(t, 16)
	a, b := c.add("a"), c.add("b")
	c.settle(30)
	if got := c.sortedCounts(); !slices.Equal(got, []int{8, 8}) {
		t.Fatalf("counts %v", got)
	}
	bShards := b.ownedIDs()
	bEpochs := map[string]int64{}
	for _, l := range b.m.Owned() {
		bEpochs[l.ShardID] = l.Epoch
	}
	b.dead = true // b's last renewal happened after a's last round

	// a's next round is the first to see b's last counters: expiry is measured from there.
	c.round()
	observed := a.clk.Now()
	nAcq := len(a.acquiredSince(0))
	for c.counts()["b"] > 0 {
		c.round()
		if a.clk.Now()-observed > dur+renew {
			t.Fatalf("b's leases still not taken %v after they were last seen to change", a.clk.Now()-observed)
		}
	}
	taken := a.acquiredSince(nAcq)
	if len(taken) != 8 {
		t.Fatalf("a acquired %d leases, want b's 8", len(taken))
	}
	if elapsed := a.clk.Now() - observed; elapsed < dur {
		t.Fatalf("a took b's leases %v after last seeing them change, before the lease duration %v", elapsed, dur)
	}
	for _, l := range taken {
		if !slices.Contains(bShards, l.ShardID) {
			t.Errorf("a acquired %s which b did not hold", l.ShardID)
		}
		if l.Epoch != bEpochs[l.ShardID]+1 {
			t.Errorf("%s: epoch %d, want %d", l.ShardID, l.Epoch, bEpochs[l.ShardID]+1)
		}
	}
	if got := len(a.m.Owned()); got != 16 {
		t.Fatalf("a owns %d, want 16", got)
	}
	// The dead worker's manager, if it ever resumed, would not consider its leases valid.
	b.clk.Advance(dur)
	for _, id := range bShards {
		if _, ok := b.m.Valid(id); ok {
			t.Errorf("dead worker still reports %s valid", id)
		}
	}
}

func (w *worker) acquiredSince(n int) []shardmap.Lease {
	a, _, _ := w.events()
	return a[n:]
}

// TestSkewedClockNeverTakesLiveLease: b never steals (steals disabled) and observes a's leases
// with a clock that starts anywhere and jumps by any amount between its rounds, even far more
// than the lease duration. As long as a renews between b's observations, b sees the counter
// change and never takes a lease. Once a stops, b takes them after the lease duration on b's
// clock.
func TestSkewedClockNeverTakesLiveLease(t *testing.T) {
	tests := []struct {
		name       string
		bStart     time.Duration
		bStep      time.Duration
		roundsToGo int // b rounds needed to take everything once a is dead
	}{
		{"b 30s behind, same pace", -30 * time.Second, renew, 4}, // 3 renew intervals are 1 ns short of 10 s
		{"b 30s ahead, same pace", 30 * time.Second, renew, 4},
		{"b 10 years ahead, tiny steps", 10 * 365 * 24 * time.Hour, time.Millisecond, 0},
		{"b steps just under the duration", 0, dur - time.Nanosecond, 2},
		{"b steps exactly the duration", 0, dur, 1},
		{"b steps an hour", 5 * time.Hour, time.Hour, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 16)
			a := c.addAt("a", 0)
			c.round()
			b := c.addAt("b", tt.bStart, shardmap.WithMaxStealsPerRound(0))
			for i := range 100 {
				a.clk.Advance(renew)
				if _, err := a.m.Round(context.Background()); err != nil {
					t.Fatal(err)
				}
				b.clk.Advance(tt.bStep)
				rep, err := b.m.Round(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if rep.Taken != 0 || len(b.m.Owned()) != 0 {
					t.Fatalf("round %d: b took %d live leases", i, rep.Taken)
				}
				if rep.Workers != 2 || rep.Target != 8 {
					t.Fatalf("round %d: b sees %d workers, target %d; want 2, 8", i, rep.Workers, rep.Target)
				}
			}
			if _, lost, _ := a.events(); len(lost) != 0 {
				t.Fatalf("a lost %v", lost)
			}
			if n := len(a.m.Owned()); n != 16 {
				t.Fatalf("a owns %d", n)
			}
			// a dies: b takes over once it sees no change for the duration on its own clock.
			if tt.roundsToGo == 0 {
				return // with 1 ms steps that takes 10,000 rounds; covered by the other cases
			}
			for i := 1; i <= tt.roundsToGo; i++ {
				b.clk.Advance(tt.bStep)
				if _, err := b.m.Round(context.Background()); err != nil {
					t.Fatal(err)
				}
				want := 0
				if i == tt.roundsToGo {
					want = 16
				}
				if n := len(b.m.Owned()); n != want {
					t.Fatalf("b round %d after a died: owns %d, want %d", i, n, want)
				}
			}
		})
	}
}

func TestPausedWorker(t *testing.T) {
	t.Run("pause shorter than the duration keeps leases valid", func(t *testing.T) {
		c := newCluster(t, 4)
		a := c.add("a")
		c.round()
		a.clk.Advance(dur - time.Nanosecond)
		for _, l := range a.m.Owned() {
			if e, ok := a.m.Valid(l.ShardID); !ok || e != l.Epoch {
				t.Fatalf("%s: Valid = %d, %v; want %d, true", l.ShardID, e, ok, l.Epoch)
			}
		}
		a.clk.Advance(time.Nanosecond)
		for _, l := range a.m.Owned() {
			if e, ok := a.m.Valid(l.ShardID); ok || e != l.Epoch {
				t.Fatalf("%s: Valid = %d, %v; want %d, false", l.ShardID, e, ok, l.Epoch)
			}
		}
	})
	t.Run("alone: leases invalid, lost, then retaken with a new epoch", func(t *testing.T) {
		c := newCluster(t, 16)
		a := c.add("a")
		c.round()
		old := a.m.Owned()
		a.clk.Advance(dur) // SIGSTOP for a lease duration
		for _, l := range old {
			if _, ok := a.m.Valid(l.ShardID); ok {
				t.Fatalf("%s still valid after the pause", l.ShardID)
			}
		}
		writes := a.store.updates.Load()
		rep, err := a.m.Round(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Lost != 16 || rep.Renewed != 0 || rep.Taken != 16 {
			t.Fatalf("round after pause: %+v; want 16 lost without renewal attempts, 16 retaken", rep)
		}
		if w := a.store.updates.Load() - writes; w != 16 {
			t.Fatalf("%d writes, want 16 takes and no renewal attempt", w)
		}
		for _, l := range old {
			e, ok := a.m.Valid(l.ShardID)
			if !ok || e != l.Epoch+1 {
				t.Errorf("%s: Valid = %d, %v; want %d, true", l.ShardID, e, ok, l.Epoch+1)
			}
		}
	})
	t.Run("taken over while paused", func(t *testing.T) {
		c := newCluster(t, 16)
		a := c.add("a")
		c.round()
		b := c.add("b", shardmap.WithMaxStealsPerRound(0))
		a.dead = true // paused: runs no rounds
		for len(b.m.Owned()) < 16 {
			c.round()
			if b.clk.Now() > 7*time.Hour*2+2*dur {
				t.Fatal("b never took a's expired leases")
			}
		}
		a.dead = false
		a.clk.Advance(b.clk.Now()) // a's clock kept running while it was stopped
		for _, l := range a.m.Owned() {
			if _, ok := a.m.Valid(l.ShardID); ok {
				t.Fatalf("%s valid on the paused worker after b took it", l.ShardID)
			}
		}
		writes := a.store.updates.Load()
		rep, err := a.m.Round(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Lost != 16 || rep.Taken != 0 {
			t.Fatalf("paused worker's round: %+v; want 16 lost, 0 taken", rep)
		}
		if w := a.store.updates.Load() - writes; w != int64(rep.Stolen) {
			t.Fatalf("%d writes for %d steals: renewals were attempted", w, rep.Stolen)
		}
		for _, l := range a.m.Owned() { // a may steal one back from b: with a newer epoch
			if l.Epoch != 3 {
				t.Errorf("a re-acquired %s with epoch %d, want 3", l.ShardID, l.Epoch)
			}
		}
	})
}

func TestParentChild(t *testing.T) {
	type step struct {
		finish []string // Finish these (owned) shards, then run a round
		want   []string // owned after the round
	}
	sh := func(id string, parents ...string) source.Shard { return source.Shard{ID: id, ParentIDs: parents} }
	tests := []struct {
		name   string
		shards []source.Shard
		steps  []step
	}{
		{"split", []source.Shard{sh("s0"), sh("s1", "s0"), sh("s2", "s0"), sh("s3")}, []step{
			{nil, []string{"s0", "s3"}},
			{nil, []string{"s0", "s3"}},
			{[]string{"s0"}, []string{"s1", "s2", "s3"}},
		}},
		{"merge", []source.Shard{sh("s0"), sh("s1"), sh("s2", "s0", "s1")}, []step{
			{nil, []string{"s0", "s1"}},
			{[]string{"s0"}, []string{"s1"}},
			{[]string{"s1"}, []string{"s2"}},
		}},
		{"chain", []source.Shard{sh("s0"), sh("s1", "s0"), sh("s2", "s1")}, []step{
			{nil, []string{"s0"}},
			{[]string{"s0"}, []string{"s1"}},
			{[]string{"s1"}, []string{"s2"}},
			{[]string{"s2"}, nil},
		}},
		{"parent trimmed away (no lease) counts as finished", []source.Shard{sh("s5", "gone"), sh("s6")}, []step{
			{nil, []string{"s5", "s6"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 0)
			a := c.add("a")
			if err := a.m.EnsureShards(context.Background(), tt.shards); err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				for _, id := range s.finish {
					if err := a.m.Finish(context.Background(), id); err != nil {
						t.Fatalf("step %d: finish %s: %v", i, id, err)
					}
				}
				c.round()
				if got := a.ownedIDs(); !slices.Equal(got, s.want) {
					t.Fatalf("step %d: owned %v, want %v", i, got, s.want)
				}
			}
			for _, l := range mustList(t, c) {
				if l.State == shardmap.StateFinished && l.Owner != "" {
					t.Errorf("finished lease %s still has owner %q", l.ShardID, l.Owner)
				}
			}
		})
	}
}

func TestBlockedChildrenNotCountedInTarget(t *testing.T) {
	// 2 open shards and 6 blocked children: target for 2 workers is 1, not 4.
	c := newCluster(t, 0)
	a := c.add("a")
	shards := []source.Shard{{ID: "p0"}, {ID: "p1"}}
	for _, id := range []string{"c0", "c1", "c2", "c3", "c4", "c5"} {
		shards = append(shards, source.Shard{ID: id, ParentIDs: []string{"p0"}})
	}
	if err := a.m.EnsureShards(context.Background(), shards); err != nil {
		t.Fatal(err)
	}
	c.add("b")
	c.settle(20)
	if got := c.sortedCounts(); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("counts %v, want [1 1]", got)
	}
}

func mustList(t *testing.T, c *cluster) []shardmap.Lease {
	t.Helper()
	ls, err := c.backing.List(context.Background(), proj)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func TestStealIsNoticed(t *testing.T) {
	setup := func(t *testing.T) (*cluster, *worker, *worker, shardmap.Lease) {
		c := newCluster(t, 16)
		a := c.add("a")
		c.round()
		b := c.add("b")
		c.workers = []*worker{b, a} // b rounds first, a after
		b.clk.Advance(renew)
		rep, err := b.m.Round(context.Background())
		if err != nil || rep.Stolen != 1 {
			t.Fatalf("b's round: %+v, %v; want one steal", rep, err)
		}
		stolen := b.m.Owned()[0]
		return c, a, b, stolen
	}
	t.Run("at next round", func(t *testing.T) {
		c, a, _, stolen := setup(t)
		if stolen.ShardID != "shardId-000000000000" || stolen.Epoch != 2 {
			t.Fatalf("stole %s epoch %d; want the lowest shard id, epoch 2", stolen.ShardID, stolen.Epoch)
		}
		// a still believes it holds the shard with the old epoch until its next renewal; the
		// cursor store's fencing rejects its writes meanwhile.
		if e, ok := a.m.Valid(stolen.ShardID); !ok || e != 1 {
			t.Fatalf("before a's round: Valid = %d, %v", e, ok)
		}
		a.clk.Advance(renew)
		if _, err := a.m.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := a.m.Valid(stolen.ShardID); ok {
			t.Fatal("a still valid after its renewal conflicted")
		}
		if _, lost, _ := a.events(); !slices.Equal(lost, []string{stolen.ShardID}) {
			t.Fatalf("a lost %v, want [%s]", lost, stolen.ShardID)
		}
		c.checkConsistent()
	})
	t.Run("release by the victim is a release", func(t *testing.T) {
		// The thief's newer epoch fences the victim, which stopped using the lease before
		// releasing it (its final cursor save either preceded the thief's claim, so the thief
		// resumes from it, or was fenced and no release followed).
		_, a, b, stolen := setup(t)
		if err := a.m.Release(context.Background(), stolen.ShardID); err != nil {
			t.Fatalf("release of a stolen lease: %v, want nil", err)
		}
		if err := a.m.Release(context.Background(), stolen.ShardID); !errors.Is(err, shardmap.ErrNotOwned) {
			t.Fatalf("second release: %v, want ErrNotOwned", err)
		}
		if e, ok := b.m.Valid(stolen.ShardID); !ok || e != 2 {
			t.Fatalf("thief: Valid = %d, %v", e, ok)
		}
	})
}

func TestStoreOutage(t *testing.T) {
	c := newCluster(t, 4)
	a := c.add("a")
	c.round()
	old := a.m.Owned()
	a.store.down.Store(true)
	var lostAt time.Duration
	for i := 1; i <= 5; i++ {
		a.clk.Advance(renew)
		rep, err := a.m.Round(context.Background())
		if !errors.Is(err, errDown) {
			t.Fatalf("round %d: err %v, want the store error", i, err)
		}
		valid := 0
		for _, l := range old {
			if _, ok := a.m.Valid(l.ShardID); ok {
				valid++
			}
		}
		sinceRenew := time.Duration(i) * renew
		switch {
		case sinceRenew < dur && (valid != 4 || rep.Lost != 0):
			t.Fatalf("round %d (%v since renewal): %d valid, %d lost; want 4 valid", i, sinceRenew, valid, rep.Lost)
		case sinceRenew >= dur && valid != 0:
			t.Fatalf("round %d (%v since renewal): %d still valid", i, sinceRenew, valid)
		}
		if rep.Lost == 4 {
			lostAt = sinceRenew
		}
	}
	firstRoundPastDur := (dur + renew - 1) / renew * renew
	if lostAt != firstRoundPastDur {
		t.Fatalf("leases reported lost at %v since renewal, want %v (first round >= %v)", lostAt, firstRoundPastDur, dur)
	}
	a.store.down.Store(false)
	a.clk.Advance(renew)
	rep, err := a.m.Round(context.Background())
	if err != nil || rep.Taken != 4 {
		t.Fatalf("after outage: %+v, %v; want 4 retaken", rep, err)
	}
	for _, l := range old {
		if e, ok := a.m.Valid(l.ShardID); !ok || e != l.Epoch+1 {
			t.Errorf("%s: Valid = %d, %v; want %d, true", l.ShardID, e, ok, l.Epoch+1)
		}
	}
}

func TestReleaseFinishAndEpochs(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3)
	a := c.add("a")
	if err := a.m.Release(ctx, "nope"); !errors.Is(err, shardmap.ErrNotOwned) {
		t.Fatalf("release of unknown shard: %v", err)
	}
	if err := a.m.Finish(ctx, "nope"); !errors.Is(err, shardmap.ErrNotOwned) {
		t.Fatalf("finish of unknown shard: %v", err)
	}
	c.round()
	for _, l := range a.m.Owned() {
		if l.Epoch != 1 || l.Owner != "a" || l.State != shardmap.StateActive {
			t.Fatalf("taken lease %+v", l)
		}
	}
	if err := a.m.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(a.m.Owned()); n != 0 {
		t.Fatalf("owned %d after ReleaseAll", n)
	}
	for _, l := range mustList(t, c) {
		if l.Owner != "" || l.Epoch != 1 {
			t.Fatalf("released lease %+v; want no owner, epoch kept at 1", l)
		}
	}
	b := c.add("b")
	b.clk.Advance(renew)
	rep, err := b.m.Round(ctx)
	if err != nil || rep.Taken != 3 {
		t.Fatalf("b: %+v, %v; want free leases taken at once", rep, err)
	}
	for _, l := range b.m.Owned() {
		if l.Epoch != 2 {
			t.Fatalf("retaken lease %+v; want epoch 2", l)
		}
	}
	id := b.m.Owned()[0].ShardID
	if err := b.m.Finish(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.m.Valid(id); ok {
		t.Fatal("finished shard still valid")
	}
	if err := b.m.Finish(ctx, id); !errors.Is(err, shardmap.ErrNotOwned) {
		t.Fatalf("second finish: %v", err)
	}
}

func TestNoReleaseHandler(t *testing.T) {
	// Without a ReleaseRequested callback the manager releases by itself and reports Lost.
	ctx := context.Background()
	c := newCluster(t, 8)
	var lost []string
	clk := shardmap.NewManualClock(0)
	a := shardmap.NewManager(c.backing, proj, "a", shardmap.WithClock(clk), shardmap.WithLogger(quiet),
		shardmap.WithEvents(shardmap.Events{Lost: func(id, _ string) { lost = append(lost, id) }}))
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	b := c.add("b")
	for range 6 {
		clk.Advance(renew)
		if _, err := a.Round(ctx); err != nil {
			t.Fatal(err)
		}
		c.round()
	}
	if got := c.counts(); got["a"] != 4 || got["b"] != 4 {
		t.Fatalf("counts %v", got)
	}
	owned := map[string]bool{}
	for _, l := range a.Owned() {
		owned[l.ShardID] = true
	}
	if len(lost) != 4 {
		t.Fatalf("a reported %d lost, want 4 (released or stolen)", len(lost))
	}
	for _, id := range lost {
		if owned[id] {
			t.Errorf("%s reported lost but still owned", id)
		}
	}
	_, _, rr := b.events()
	if len(rr) != 0 {
		t.Fatalf("b asked to release %v", rr)
	}
}

func TestEnsureShards(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 0)
	a, b := c.add("a"), c.add("b")
	shards := shardList(16)
	shards[3].ParentIDs = []string{"shardId-000000000001", "shardId-000000000002"}
	done := make(chan error, 2)
	for _, w := range []*worker{a, b} {
		go func() { done <- w.m.EnsureShards(ctx, shards) }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ls := mustList(t, c)
	if len(ls) != 16 {
		t.Fatalf("%d leases", len(ls))
	}
	for i, l := range ls {
		if l.ShardID != shards[i].ID || l.Owner != "" || l.Epoch != 0 || l.State != shardmap.StateActive ||
			!slices.Equal(l.ParentIDs, shards[i].ParentIDs) {
			t.Fatalf("lease %d: %+v", i, l)
		}
	}
	creates := a.store.creates.Load()
	if err := a.m.EnsureShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	if n := a.store.creates.Load() - creates; n != 0 {
		t.Fatalf("%d creates for existing leases", n)
	}
	a.store.down.Store(true)
	if err := a.m.EnsureShards(ctx, shards); !errors.Is(err, errDown) {
		t.Fatalf("EnsureShards with store down: %v", err)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name      string
		opts      []shardmap.Option
		wantDur   time.Duration
		wantRenew time.Duration
	}{
		{"defaults", nil, 6 * time.Second, 2 * time.Second},
		{"duration sets renew", []shardmap.Option{shardmap.WithLeaseDuration(9 * time.Second)}, 9 * time.Second, 3 * time.Second},
		{"explicit renew", []shardmap.Option{shardmap.WithRenewInterval(time.Second)}, 6 * time.Second, time.Second},
		{"renew >= duration falls back", []shardmap.Option{shardmap.WithLeaseDuration(6 * time.Second), shardmap.WithRenewInterval(6 * time.Second)}, 6 * time.Second, 2 * time.Second},
		{"non-positive ignored", []shardmap.Option{shardmap.WithLeaseDuration(-1), shardmap.WithRenewInterval(0)}, 6 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := shardmap.NewManager(nil, proj, "w", tt.opts...)
			if m.LeaseDuration() != tt.wantDur || m.RenewInterval() != tt.wantRenew {
				t.Fatalf("duration %v renew %v; want %v %v", m.LeaseDuration(), m.RenewInterval(), tt.wantDur, tt.wantRenew)
			}
		})
	}
}

// TestWritesPerRound counts lease store calls in a balanced steady state: one List and one
// conditional write per owned lease per worker per round, nothing else.
func TestWritesPerRound(t *testing.T) {
	tests := []struct {
		shards, workers int
	}{{16, 2}, {16, 3}, {64, 4}}
	for _, tt := range tests {
		c := newCluster(t, tt.shards)
		for i := range tt.workers {
			c.add(string(rune('a' + i)))
		}
		c.settle(100)
		for _, w := range c.workers {
			w.store.updates.Store(0)
			w.store.lists.Store(0)
		}
		const rounds = 10
		for range rounds {
			c.round()
		}
		for _, w := range c.workers {
			owned := int64(len(w.m.Owned()))
			if u, l := w.store.updates.Load(), w.store.lists.Load(); u != owned*rounds || l != rounds {
				t.Errorf("%d shards/%d workers, %s owns %d: %d updates and %d lists in %d rounds; want %d and %d",
					tt.shards, tt.workers, w.id, owned, u, l, rounds, owned*rounds, rounds)
			}
		}
	}
}

func TestRunUntilCanceled(t *testing.T) {
	c := newCluster(t, 4)
	acquired := make(chan string, 4)
	m := shardmap.NewManager(c.backing, proj, "a", shardmap.WithLogger(quiet), shardmap.WithLeaseDuration(300*time.Millisecond),
		shardmap.WithEvents(shardmap.Events{Acquired: func(id string, _ shardmap.Lease, _, _ string) { acquired <- id }}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for range 4 {
		select {
		case <-acquired:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not acquire the leases")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if err := m.ReleaseAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.counts(); got[""] != 4 {
		t.Fatalf("after ReleaseAll: %v", got)
	}
}

// TestEventsSayHowAndWhy: Acquired says how a lease was taken and from whom, Lost says why, as
// the runner's trace reports them.
func TestEventsSayHowAndWhy(t *testing.T) {
	tests := []struct {
		name          string
		run           func(c *cluster, a, b *worker)
		wantHowA      []string // distinct "how from" of a's acquisitions
		wantHowB      []string
		wantWhyA      []string // distinct reasons of a's losses
		wantLostA     int
		wantAcquiredB int
		bOpts         []shardmap.Option
	}{
		{
			name:     "free leases",
			run:      func(c *cluster, a, b *worker) { b.dead = true; c.round() },
			wantHowA: []string{shardmap.HowFree + " "},
		},
		{
			name: "steal, noticed by a conflicting renewal",
			run: func(c *cluster, a, b *worker) {
				b.dead = true
				c.round()
				b.dead = false
				c.workers = []*worker{b, a}
				c.round()
			},
			wantHowA: []string{shardmap.HowFree + " "}, wantHowB: []string{shardmap.HowSteal + " a"},
			wantWhyA: []string{shardmap.WhyConflict}, wantLostA: 1, wantAcquiredB: 1,
		},
		{
			name: "expired: a stopped renewing",
			run: func(c *cluster, a, b *worker) {
				b.dead = true
				c.round()
				a.dead, b.dead = true, false
				for range 6 {
					c.round()
				}
			},
			wantHowA: []string{shardmap.HowFree + " "}, wantHowB: []string{shardmap.HowExpired + " a"}, wantAcquiredB: 16,
			bOpts: []shardmap.Option{shardmap.WithMaxStealsPerRound(0)},
		},
		{
			name: "not renewed within the duration: a paused",
			run: func(c *cluster, a, b *worker) {
				b.dead = true
				c.round()
				a.clk.Advance(dur)
				c.round()
			},
			// a takes them back as expired: lost, its own earlier acquisitions are like anyone's.
			wantHowA: []string{shardmap.HowExpired + " a", shardmap.HowFree + " "}, wantWhyA: []string{shardmap.WhyNotRenewed}, wantLostA: 16,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 16)
			a, b := c.add("a"), c.add("b", tt.bOpts...)
			tt.run(c, a, b)
			distinct := func(xs []string) []string {
				out := slices.Clone(xs)
				slices.Sort(out)
				return slices.Compact(out)
			}
			a.mu.Lock()
			howA, whyA, lostA := distinct(a.how), distinct(a.why), len(a.lost)
			a.mu.Unlock()
			b.mu.Lock()
			howB, acqB := distinct(b.how), len(b.acquired)
			b.mu.Unlock()
			if !slices.Equal(howA, tt.wantHowA) || !slices.Equal(howB, tt.wantHowB) {
				t.Errorf("acquired how: a %q, b %q; want a %q, b %q", howA, howB, tt.wantHowA, tt.wantHowB)
			}
			if !slices.Equal(whyA, tt.wantWhyA) || lostA != tt.wantLostA {
				t.Errorf("a lost %d leases because %q; want %d because %q", lostA, whyA, tt.wantLostA, tt.wantWhyA)
			}
			if acqB != tt.wantAcquiredB {
				t.Errorf("b acquired %d leases, want %d", acqB, tt.wantAcquiredB)
			}
		})
	}
}

// gateStore holds the first Update until released, then writes it whatever happened to the
// caller's context and reports the context's error if it ended meanwhile: a conditional write
// that lands although its client gave up on it (cancelled in flight).
type gateStore struct {
	shardmap.LeaseStore
	once             sync.Once
	entered, release chan struct{}
}

func (g *gateStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.LeaseStore.Update(ctx, l)
	}
	close(g.entered)
	<-g.release
	nl, err := g.LeaseStore.Update(context.Background(), l)
	if ctx.Err() != nil {
		return shardmap.Lease{}, ctx.Err()
	}
	return nl, err
}

// TestStopFinishesTheRoundUnderWay: Run's context ends while a take is in flight. The round
// is finished rather than cancelled, so the lease taken is known and ReleaseAll frees it. (A
// cancelled take that landed anyway used to leave the lease held by the stopped worker until it
// expired: a graceful stop that did not release everything.)
func TestStopFinishesTheRoundUnderWay(t *testing.T) {
	backing := memlease.New()
	g := &gateStore{LeaseStore: backing, entered: make(chan struct{}), release: make(chan struct{})}
	m := shardmap.NewManager(g, proj, "a", shardmap.WithLogger(quiet), shardmap.WithLeaseDuration(dur))
	if err := m.EnsureShards(context.Background(), shardList(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-g.entered // the take's write is under way
	cancel()    // the worker stops
	close(g.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if n := len(m.Owned()); n != 1 {
		t.Fatalf("after the round under way, the manager holds %d leases; want the one it took", n)
	}
	if err := m.ReleaseAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	ls, err := backing.List(context.Background(), proj)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Owner != "" {
		t.Fatalf("leases after the stop: %+v; want the one lease free", ls)
	}
}
