package shardmap_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
	"github.com/projhost/projhost/source"
)

const (
	proj  = "flights"
	dur   = 10 * time.Second
	renew = dur / 3
)

var quiet = slog.New(slog.DiscardHandler)

var errDown = errors.New("test: store unreachable")

// countingStore wraps a LeaseStore, counts calls and can simulate an unreachable store.
type countingStore struct {
	shardmap.LeaseStore
	lists, creates, updates atomic.Int64
	down                    atomic.Bool
	listDown                atomic.Bool  // only List fails
	unknown                 atomic.Int64 // Updates left to apply and then fail (applyThenFail)
}

func (s *countingStore) List(ctx context.Context, p string) ([]shardmap.Lease, error) {
	s.lists.Add(1)
	if s.down.Load() || s.listDown.Load() {
		return nil, errDown
	}
	return s.LeaseStore.List(ctx, p)
}

func (s *countingStore) Create(ctx context.Context, l shardmap.Lease) error {
	s.creates.Add(1)
	if s.down.Load() {
		return errDown
	}
	return s.LeaseStore.Create(ctx, l)
}

func (s *countingStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	s.updates.Add(1)
	if s.down.Load() {
		return shardmap.Lease{}, errDown
	}
	if s.unknown.Load() > 0 && s.unknown.Add(-1) >= 0 {
		if _, err := s.LeaseStore.Update(ctx, l); err != nil {
			return shardmap.Lease{}, err
		}
		return shardmap.Lease{}, errUnknown
	}
	return s.LeaseStore.Update(ctx, l)
}

// errUnknown is the error of a write whose outcome the store did not tell (it was applied).
var errUnknown = errors.New("test: timed out after the write was sent")

// applyThenFail makes the next n Updates apply and then fail with errUnknown, as a network
// store's write whose answer was lost.
func (s *countingStore) applyThenFail(n int64) { s.unknown.Store(n) }

// worker is one simulated worker process with its own monotonic clock. Its runner hands a
// shard over at once when asked (the cursor save is instantaneous here).
type worker struct {
	id    string
	clk   *shardmap.ManualClock
	store *countingStore
	m     *shardmap.Manager
	dead  bool

	mu       sync.Mutex
	acquired []shardmap.Lease
	how      []string // per acquired lease: "how from"
	lost     []string
	why      []string // per lost lease
	relReq   []string
}

func (w *worker) events() (acq []shardmap.Lease, lost, relReq []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acquired), slices.Clone(w.lost), slices.Clone(w.relReq)
}

func (w *worker) ownedIDs() []string {
	var ids []string
	for _, l := range w.m.Owned() {
		ids = append(ids, l.ShardID)
	}
	return ids
}

type cluster struct {
	t       testing.TB
	backing *memlease.Store
	workers []*worker
	rng     *rand.Rand // nil: workers run rounds in insertion order
}

func newCluster(t testing.TB, shards int) *cluster {
	t.Helper()
	c := &cluster{t: t, backing: memlease.New()}
	if shards > 0 {
		w := c.add("setup")
		if err := w.m.EnsureShards(context.Background(), shardList(shards)); err != nil {
			t.Fatal(err)
		}
		c.workers = nil
	}
	return c
}

func shardList(n int) []source.Shard {
	out := make([]source.Shard, n)
	for i := range out {
		out[i] = source.Shard{ID: fmt.Sprintf("shardId-%012d", i)}
	}
	return out
}

// add starts a worker whose clock starts at an arbitrary reading (clocks are not shared).
func (c *cluster) add(id string, opts ...shardmap.Option) *worker {
	return c.addAt(id, time.Duration(len(c.workers)+1)*7*time.Hour, opts...)
}

func (c *cluster) addAt(id string, clockStart time.Duration, opts ...shardmap.Option) *worker {
	w := &worker{id: id, clk: shardmap.NewManualClock(clockStart), store: &countingStore{LeaseStore: c.backing}}
	ev := shardmap.Events{
		Acquired: func(shard string, l shardmap.Lease, how, from string) {
			w.mu.Lock()
			w.acquired = append(w.acquired, l)
			w.how = append(w.how, how+" "+from)
			w.mu.Unlock()
		},
		Lost: func(shard, why string) {
			w.mu.Lock()
			w.lost = append(w.lost, shard)
			w.why = append(w.why, why)
			w.mu.Unlock()
		},
		ReleaseRequested: func(shard string) {
			w.mu.Lock()
			w.relReq = append(w.relReq, shard)
			w.mu.Unlock()
			if _, ok := w.m.Valid(shard); !ok {
				c.t.Errorf("%s: release requested for %s which is not valid", id, shard)
			}
			if err := w.m.Release(context.Background(), shard); err != nil && !errors.Is(err, shardmap.ErrConflict) {
				c.t.Errorf("%s: release %s: %v", id, shard, err)
			}
		},
	}
	all := append([]shardmap.Option{
		shardmap.WithLeaseDuration(dur),
		shardmap.WithClock(w.clk),
		shardmap.WithLogger(quiet),
		shardmap.WithEvents(ev),
	}, opts...)
	w.m = shardmap.NewManager(w.store, proj, id, all...)
	c.workers = append(c.workers, w)
	return w
}

// round advances every live worker's clock by one renew interval and runs its Round.
func (c *cluster) round() {
	c.t.Helper()
	order := slices.Clone(c.workers)
	if c.rng != nil {
		c.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for _, w := range order {
		if w.dead {
			continue
		}
		w.clk.Advance(renew)
		if _, err := w.m.Round(context.Background()); err != nil {
			c.t.Fatalf("%s: round: %v", w.id, err)
		}
	}
}

// counts returns the number of active leases per owner in the store ("" = free).
func (c *cluster) counts() map[string]int {
	c.t.Helper()
	ls, err := c.backing.List(context.Background(), proj)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range ls {
		if l.State == shardmap.StateActive {
			out[l.Owner]++
		}
	}
	return out
}

// assignment returns shard -> owner from the store.
func (c *cluster) assignment() map[string]string {
	c.t.Helper()
	ls, err := c.backing.List(context.Background(), proj)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range ls {
		out[l.ShardID] = l.Owner
	}
	return out
}

// checkConsistent asserts that what each live manager believes it owns is what the store says.
func (c *cluster) checkConsistent() {
	c.t.Helper()
	ls, err := c.backing.List(context.Background(), proj)
	if err != nil {
		c.t.Fatal(err)
	}
	stored := map[string]shardmap.Lease{}
	for _, l := range ls {
		stored[l.ShardID] = l
	}
	for _, w := range c.workers {
		if w.dead {
			continue
		}
		for _, l := range w.m.Owned() {
			s := stored[l.ShardID]
			if s.Owner != w.id || s.Epoch != l.Epoch || s.Counter != l.Counter {
				c.t.Errorf("%s believes it owns %s (epoch %d counter %d) but store has owner %q epoch %d counter %d",
					w.id, l.ShardID, l.Epoch, l.Counter, s.Owner, s.Epoch, s.Counter)
			}
		}
	}
}

// sortedCounts returns the live workers' lease counts, descending.
func (c *cluster) sortedCounts() []int {
	cs := c.counts()
	var out []int
	for _, w := range c.workers {
		if !w.dead {
			out = append(out, cs[w.id])
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// settle runs rounds until the store's assignment stayed the same for 6 rounds (two lease
// durations, so that leases of dead workers have expired) and returns
// how many rounds ran before it last changed; it fails after max rounds.
func (c *cluster) settle(max int) int {
	c.t.Helper()
	prev := c.assignment()
	stable, last := 0, 0
	for i := 1; i <= max; i++ {
		c.round()
		cur := c.assignment()
		if mapsEqual(prev, cur) {
			stable++
			if stable == 6 {
				return last
			}
		} else {
			stable, last = 0, i
		}
		prev = cur
	}
	c.t.Fatalf("assignment still changing after %d rounds: %v", max, c.counts())
	return 0
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
