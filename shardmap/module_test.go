package shardmap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
)

const modA, modB = "sha256:aaaa", "sha256:bbbb"

func conflictOf(t *testing.T, err error) *shardmap.ModuleConflictError {
	t.Helper()
	var ce *shardmap.ModuleConflictError
	if !errors.As(err, &ce) || !errors.Is(err, shardmap.ErrModuleConflict) {
		t.Fatalf("err = %v, want a *ModuleConflictError wrapping ErrModuleConflict", err)
	}
	return ce
}

func modules(t *testing.T, c *cluster) map[string]string {
	t.Helper()
	ls, err := c.backing.List(context.Background(), proj)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range ls {
		out[l.ShardID] = l.Owner + "/" + l.Module
	}
	return out
}

// TestModuleOnLease: takes and renewals write the module; release clears it with the owner.
func TestModuleOnLease(t *testing.T) {
	c := newCluster(t, 2)
	a := c.add("a", shardmap.WithModule(modA))
	c.round()
	c.round()
	for id, om := range modules(t, c) {
		if om != "a/"+modA {
			t.Fatalf("%s: owner/module %q, want a/%s", id, om, modA)
		}
	}
	if err := a.m.ReleaseAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, om := range modules(t, c) {
		if om != "/" {
			t.Fatalf("%s after release: owner/module %q, want none", id, om)
		}
	}
}

// TestModuleConflictLive: a worker of another module takes nothing while the first one's
// leases are live, and refuses once it sees them renewed; the first one is undisturbed.
func TestModuleConflictLive(t *testing.T) {
	c := newCluster(t, 4)
	a := c.add("a", shardmap.WithModule(modA))
	c.round()
	b := c.add("b", shardmap.WithModule(modB))
	ctx := context.Background()
	b.clk.Advance(renew)
	rep, err := b.m.Round(ctx)
	if err != nil || rep.Foreign != 4 || rep.Taken+rep.Stolen != 0 || !b.m.Blocked() {
		t.Fatalf("b's first round: %+v, %v, blocked %v; want 4 foreign, nothing taken, no error yet, blocked", rep, err, b.m.Blocked())
	}
	a.clk.Advance(renew)
	if _, err := a.m.Round(ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(renew)
	_, err = b.m.Round(ctx)
	ce := conflictOf(t, err)
	if ce.Projection != proj || ce.Module != modB || ce.OtherModule != modA || ce.OtherWorker != "a" || ce.ShardID == "" {
		t.Fatalf("conflict %+v", *ce)
	}
	for _, want := range []string{proj, modA, modB, `"a"`, "restart them all with the same module"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message %q does not contain %q", err, want)
		}
	}
	if acq, _, _ := b.events(); len(acq) != 0 {
		t.Fatalf("b acquired %v", acq)
	}
	for range 5 {
		a.clk.Advance(renew)
		if rep, err := a.m.Round(ctx); err != nil || rep.Renewed != 4 || rep.Lost != 0 {
			t.Fatalf("a after b refused: %+v, %v", rep, err)
		}
	}
}

// TestModuleDeadOwner: the leases of a crashed worker of another module block takes for one
// lease duration, then are taken as expired, without a conflict.
func TestModuleDeadOwner(t *testing.T) {
	c := newCluster(t, 4)
	a := c.add("a", shardmap.WithModule(modA))
	c.round()
	a.dead = true
	b := c.add("b", shardmap.WithModule(modB))
	ctx := context.Background()
	for i := 1; ; i++ {
		b.clk.Advance(renew)
		rep, err := b.m.Round(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if rep.Taken > 0 {
			if i < 4 { // seen at round 1: expired at round 4 (3 renew intervals = 1 lease duration)
				t.Fatalf("took %d leases at round %d, before they expired", rep.Taken, i)
			}
			break
		}
		if i == 10 {
			t.Fatal("the dead owner's leases were never taken")
		}
	}
	for id, om := range modules(t, c) {
		if om != "b/"+modB {
			t.Fatalf("%s: %q, want b/%s", id, om, modB)
		}
	}
}

// TestModuleGracefulSwitch: after the old workers release their leases, a worker of a new
// module takes them in its first round.
func TestModuleGracefulSwitch(t *testing.T) {
	c := newCluster(t, 4)
	a := c.add("a", shardmap.WithModule(modA))
	c.round()
	if err := a.m.ReleaseAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.dead = true
	b := c.add("b", shardmap.WithModule(modB))
	b.clk.Advance(renew)
	rep, err := b.m.Round(context.Background())
	if err != nil || rep.Taken != 4 {
		t.Fatalf("new module's first round: %+v, %v; want 4 taken", rep, err)
	}
}

// TestModuleNoIdentity: leases without a module (older workers, embedders without one) never
// conflict, and a Manager without a module checks nothing.
func TestModuleNoIdentity(t *testing.T) {
	c := newCluster(t, 4)
	c.add("a")
	c.add("b", shardmap.WithModule(modB))
	c.add("c")
	if got := c.settle(100); got == 0 {
		t.Fatal("no assignment")
	}
	if cs := c.sortedCounts(); cs[0] != 2 || cs[2] != 1 {
		t.Fatalf("counts %v, want 2/1/1", cs)
	}
}

// raceStore makes the observing List of both workers happen before either writes, so that both
// take leases of the same free set at the same time.
type raceStore struct {
	shardmap.LeaseStore
	listed *sync.WaitGroup
	once   sync.Once
	wrote  sync.Once
}

func (s *raceStore) List(ctx context.Context, p string) ([]shardmap.Lease, error) {
	ls, err := s.LeaseStore.List(ctx, p)
	s.once.Do(s.listed.Done)
	return ls, err
}

func (s *raceStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	s.wrote.Do(s.listed.Wait)
	return s.LeaseStore.Update(ctx, l)
}

// TestModuleRace: two workers of different modules start at the same instant on free leases.
// Whatever the interleaving of their takes, at most one of them tells its runner about any
// lease, and a worker that took leases and saw the other's hands them back and refuses.
func TestModuleRace(t *testing.T) {
	bothTook := 0
	defer func() { t.Logf("both workers took leases (then both refused) in %d of 200 iterations", bothTook) }()
	for i := range 200 {
		backing := memlease.New()
		setup := shardmap.NewManager(backing, proj, "setup", shardmap.WithLogger(quiet))
		if err := setup.EnsureShards(context.Background(), shardList(8)); err != nil {
			t.Fatal(err)
		}
		var listed sync.WaitGroup
		listed.Add(2)
		type result struct {
			acquired   []string
			err        error
			m          *shardmap.Manager
			handedBack int
		}
		res := make([]result, 2)
		var wg sync.WaitGroup
		for w, mod := range []string{modA, modB} {
			st := &raceStore{LeaseStore: backing, listed: &listed}
			id := fmt.Sprintf("w%d", w)
			var mu sync.Mutex
			m := shardmap.NewManager(st, proj, id, shardmap.WithModule(mod), shardmap.WithLeaseDuration(dur), shardmap.WithLogger(quiet),
				shardmap.WithClock(shardmap.NewManualClock(0)),
				shardmap.WithEvents(shardmap.Events{Acquired: func(s string, _ shardmap.Lease, _, _ string) {
					mu.Lock()
					res[w].acquired = append(res[w].acquired, s)
					mu.Unlock()
				}}))
			res[w].m = m
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rep shardmap.RoundReport
				rep, res[w].err = m.Round(context.Background())
				res[w].handedBack = rep.HandedBack
			}()
		}
		wg.Wait()
		if res[0].handedBack > 0 && res[1].handedBack > 0 {
			bothTook++
		}
		if len(res[0].acquired) > 0 && len(res[1].acquired) > 0 {
			t.Fatalf("iteration %d: both modules acquired leases: %v and %v", i, res[0].acquired, res[1].acquired)
		}
		ls, _ := backing.List(context.Background(), proj)
		for w, r := range res {
			if r.err != nil {
				conflictOf(t, r.err)
				if len(r.acquired) > 0 || len(r.m.Owned()) > 0 {
					t.Fatalf("iteration %d: w%d refused but acquired %v", i, w, r.acquired)
				}
				for _, l := range ls {
					if l.Owner == fmt.Sprintf("w%d", w) {
						t.Fatalf("iteration %d: w%d refused but still owns %s in the store", i, w, l.ShardID)
					}
				}
			} else if len(r.acquired) != len(r.m.Owned()) {
				t.Fatalf("iteration %d: w%d acquired %v, owns %d", i, w, r.acquired, len(r.m.Owned()))
			}
		}
	}
}

// scriptedStore holds a worker's first write and its second List (the confirming one) until
// told, then returns that List's answer only once told again (confirmed is closed when it has
// read), and fails the Updates that fail says (a transient store error).
type scriptedStore struct {
	shardmap.LeaseStore
	mu                sync.Mutex
	lists             int
	listed, wrote     chan struct{}
	write, confirm    chan struct{}
	confirmed, answer chan struct{}
	writing           sync.Once
	fail              func(shardmap.Lease) bool
}

func newScripted(backing shardmap.LeaseStore, fail func(shardmap.Lease) bool) *scriptedStore {
	return &scriptedStore{LeaseStore: backing, listed: make(chan struct{}), wrote: make(chan struct{}),
		write: make(chan struct{}), confirm: make(chan struct{}), confirmed: make(chan struct{}),
		answer: make(chan struct{}), fail: fail}
}

func (s *scriptedStore) List(ctx context.Context, p string) ([]shardmap.Lease, error) {
	s.mu.Lock()
	s.lists++
	n := s.lists
	s.mu.Unlock()
	if n == 2 {
		<-s.confirm
	}
	ls, err := s.LeaseStore.List(ctx, p)
	if n == 1 {
		close(s.listed)
	}
	if n == 2 {
		close(s.confirmed)
		<-s.answer
	}
	return ls, err
}

func (s *scriptedStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	s.writing.Do(func() { <-s.write })
	if l.Owner != "" && s.fail(l) {
		return shardmap.Lease{}, errDown
	}
	return s.LeaseStore.Update(ctx, l)
}

// TestModuleRaceBothTake scripts the worst interleaving: both workers list the free leases,
// A takes the even shards, B the odd ones, then both check: both hand their leases back
// unused and refuse; the runner of neither hears of any lease.
func TestModuleRaceBothTake(t *testing.T) {
	backing := memlease.New()
	setup := shardmap.NewManager(backing, proj, "setup", shardmap.WithLogger(quiet))
	if err := setup.EnsureShards(context.Background(), shardList(4)); err != nil {
		t.Fatal(err)
	}
	odd := func(l shardmap.Lease) bool { return (l.ShardID[len(l.ShardID)-1]-'0')%2 == 1 }
	even := func(l shardmap.Lease) bool { return !odd(l) }
	stA, stB := newScripted(backing, odd), newScripted(backing, even)
	var acquired []string
	var mu sync.Mutex
	mk := func(st shardmap.LeaseStore, id, mod string) *shardmap.Manager {
		return shardmap.NewManager(st, proj, id, shardmap.WithModule(mod), shardmap.WithLeaseDuration(dur), shardmap.WithLogger(quiet),
			shardmap.WithClock(shardmap.NewManualClock(0)),
			shardmap.WithEvents(shardmap.Events{Acquired: func(s string, _ shardmap.Lease, _, _ string) {
				mu.Lock()
				acquired = append(acquired, id+" "+s)
				mu.Unlock()
			}}))
	}
	a, b := mk(stA, "a", modA), mk(stB, "b", modB)
	errs := make([]error, 2)
	reps := make([]shardmap.RoundReport, 2)
	var wg sync.WaitGroup
	for i, m := range []*shardmap.Manager{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); reps[i], errs[i] = m.Round(context.Background()) }()
	}
	<-stA.listed
	<-stB.listed
	close(stA.write)
	close(stB.write)
	// Both wrote their takes once both have asked to confirm (the second List waits).
	waitOwners(t, backing, 4)
	close(stA.confirm)
	close(stB.confirm)
	// Both confirming Lists read the store before either worker hands its leases back (else
	// the later one could find the other's leases already gone, and rightly keep its own).
	<-stA.confirmed
	<-stB.confirmed
	close(stA.answer)
	close(stB.answer)
	wg.Wait()
	for i, err := range errs {
		ce := conflictOf(t, err)
		if reps[i].HandedBack != 2 || ce.OtherWorker != []string{"b", "a"}[i] {
			t.Fatalf("worker %d: %+v, conflict %+v; want 2 handed back, the other named", i, reps[i], *ce)
		}
	}
	if len(acquired) != 0 || len(a.Owned())+len(b.Owned()) != 0 {
		t.Fatalf("acquired %v; owned %d and %d", acquired, len(a.Owned()), len(b.Owned()))
	}
	ls, _ := backing.List(context.Background(), proj)
	for _, l := range ls {
		if l.Owner != "" || l.Module != "" {
			t.Fatalf("after both refused: %+v, want free", l)
		}
	}
}

// waitOwners waits until n leases have an owner.
func waitOwners(t *testing.T, s shardmap.LeaseStore, n int) {
	t.Helper()
	for i := 0; ; i++ {
		ls, _ := s.List(context.Background(), proj)
		got := 0
		for _, l := range ls {
			if l.Owner != "" {
				got++
			}
		}
		if got == n {
			return
		}
		if i == 5000 {
			t.Fatalf("%d leases owned, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestModuleNewcomerDoesNotStopRunning: a worker that processes leases and sees a lease of
// another module appear (a newcomer's take, which the newcomer hands back when it refuses)
// keeps renewing its own, takes nothing meanwhile, does not balance with it, and takes the
// lease once it is free again.
func TestModuleNewcomerDoesNotStopRunning(t *testing.T) {
	c := newCluster(t, 4)
	a := c.add("a", shardmap.WithModule(modA))
	c.round()
	ctx := context.Background()
	const s3 = "shardId-000000000003"
	if err := a.m.Release(ctx, s3); err != nil {
		t.Fatal(err)
	}
	ls, _ := c.backing.List(ctx, proj)
	l := ls[3]
	l.Owner, l.Module, l.Epoch = "b", modB, l.Epoch+1
	l, err := c.backing.Update(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	a.clk.Advance(renew)
	rep, err := a.m.Round(ctx)
	if err != nil || rep.Foreign != 1 || rep.Renewed != 3 || rep.Taken != 0 || rep.Workers != 1 || rep.ReleaseRequested != 0 || a.m.Blocked() {
		t.Fatalf("a with a newcomer's lease: %+v, %v, blocked %v; want 3 renewed, 1 foreign, nothing taken or released", rep, err, a.m.Blocked())
	}
	l.Owner, l.Module = "", ""
	if _, err := c.backing.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	a.clk.Advance(renew)
	if rep, err := a.m.Round(ctx); err != nil || rep.Taken != 1 || rep.Foreign != 0 {
		t.Fatalf("a after the hand-back: %+v, %v; want it taken", rep, err)
	}
}
