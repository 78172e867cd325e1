// Package memlease is an in-memory shardmap.LeaseStore for tests and single-process runs.
//
// It keeps one lease per (projection, shard) in a map guarded by a mutex, so it is safe for
// concurrent use by many goroutines (and many shardmap.Manager values) in one process. It
// implements exactly the conditional-write contract of shardmap.LeaseStore: Update succeeds only
// when the stored counter equals the caller's, and stores counter+1. Nothing is persisted.
package memlease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/projhost/projhost/shardmap"
)

// ErrInvalidLease is returned by Create and Update for a lease without a projection or shard id.
var ErrInvalidLease = errors.New("memlease: lease needs a projection and a shard id")

type key struct{ projection, shard string }

// Store is an in-memory shardmap.LeaseStore. The zero value is not usable; call New.
type Store struct {
	mu     sync.Mutex
	leases map[key]shardmap.Lease
}

var (
	_ shardmap.LeaseStore   = (*Store)(nil)
	_ shardmap.BatchUpdater = (*Store)(nil)
)

// New returns an empty store.
func New() *Store { return &Store{leases: make(map[key]shardmap.Lease)} }

// List returns copies of every lease of projection, ordered by shard id. It honours ctx only
// before reading.
func (s *Store) List(ctx context.Context, projection string) ([]shardmap.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]shardmap.Lease, 0, len(s.leases))
	for k, l := range s.leases {
		if k.projection == projection {
			out = append(out, clone(l))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b shardmap.Lease) int { return cmp.Compare(a.ShardID, b.ShardID) })
	return out, nil
}

// Create stores a copy of l (with l.Counter as the stored counter) if no lease exists for
// (l.Projection, l.ShardID); shardmap.ErrExists otherwise.
func (s *Store) Create(ctx context.Context, l shardmap.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.Projection == "" || l.ShardID == "" {
		return ErrInvalidLease
	}
	k := key{l.Projection, l.ShardID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[k]; ok {
		return fmt.Errorf("memlease: create %s/%s: %w", l.Projection, l.ShardID, shardmap.ErrExists)
	}
	s.leases[k] = clone(l)
	return nil
}

// Update replaces the stored lease with l when the stored counter equals l.Counter, stores
// l.Counter+1 and returns a copy of what it stored. A *shardmap.ConflictError (wrapped) when the
// counter differs or the lease does not exist.
func (s *Store) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	if err := ctx.Err(); err != nil {
		return shardmap.Lease{}, err
	}
	if l.Projection == "" || l.ShardID == "" {
		return shardmap.Lease{}, ErrInvalidLease
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(l)
}

// UpdateMany applies Update to every lease of ls under one lock (shardmap.BatchUpdater): each
// result is the stored lease or the error Update would return. The call fails as a whole only
// when ctx is done.
func (s *Store) UpdateMany(ctx context.Context, ls []shardmap.Lease) ([]shardmap.UpdateResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]shardmap.UpdateResult, len(ls))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range ls {
		if l.Projection == "" || l.ShardID == "" {
			out[i].Err = ErrInvalidLease
			continue
		}
		out[i].Lease, out[i].Err = s.updateLocked(l)
	}
	return out, nil
}

func (s *Store) updateLocked(l shardmap.Lease) (shardmap.Lease, error) {
	k := key{l.Projection, l.ShardID}
	cur, ok := s.leases[k]
	if !ok {
		return shardmap.Lease{}, fmt.Errorf("memlease: update: %w", shardmap.NewConflict(l, nil))
	}
	if cur.Counter != l.Counter {
		return shardmap.Lease{}, fmt.Errorf("memlease: update: %w", shardmap.NewConflict(l, &cur))
	}
	n := clone(l)
	n.Counter++
	s.leases[k] = n
	return clone(n), nil
}

func clone(l shardmap.Lease) shardmap.Lease {
	l.ParentIDs = slices.Clone(l.ParentIDs)
	return l
}
