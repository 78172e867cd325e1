// Package shardmap assigns shards to workers with leases (DESIGN §4).
//
// A lease is one item per (projection, shard). Every write to it is conditional on the lease
// counter the writer last saw, so stores need only a conditional write (DynamoDB
// ConditionExpression, a SQL UPDATE ... WHERE counter = ?), never a transaction. Expiry never
// compares wall clocks: a lease is expired when its counter has not changed for the lease
// duration measured on the observer's own monotonic clock (the rule of the Kinesis Client
// Library), so a worker whose clock is skewed cannot steal a live lease.
package shardmap

import (
	"context"
	"errors"
)

// State of a lease.
type State string

const (
	StateActive   State = "active"   // the shard is (or will be) processed
	StateFinished State = "finished" // a closed shard processed to its end; children may start
)

// ErrConflict is returned by LeaseStore.Update when the stored counter differs from the
// expected one (someone else wrote the lease) or the lease does not exist.
var ErrConflict = errors.New("shardmap: lease changed since it was read (conditional write failed)")

// ErrExists is returned by LeaseStore.Create when the lease already exists.
var ErrExists = errors.New("shardmap: lease already exists")

// Lease is one shard's lease.
type Lease struct {
	Projection string
	ShardID    string
	Owner      string   // worker id of the lease owner; "" when free
	Counter    int64    // lease counter: incremented by every write (renewal, take, release)
	Epoch      int64    // fencing token: incremented whenever the owner changes to a new owner
	ParentIDs  []string // parent shard ids (resharding)
	State      State
}

// LeaseStore persists leases. Implementations are safe for concurrent use by many workers and
// processes, and must pass shardmap/leasetest.
type LeaseStore interface {
	// List returns every lease of a projection, ordered by shard id.
	List(ctx context.Context, projection string) ([]Lease, error)
	// Create stores l if no lease exists for its (projection, shard); ErrExists otherwise.
	// The stored counter is l.Counter.
	Create(ctx context.Context, l Lease) error
	// Update replaces the lease with l if its stored counter equals l.Counter, storing
	// l.Counter+1, and returns the stored lease. ErrConflict when the counter differs or the
	// lease is missing.
	Update(ctx context.Context, l Lease) (Lease, error)
}
