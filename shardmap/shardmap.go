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
	"fmt"
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

// ConflictError is the error, wrapping ErrConflict, that a LeaseStore's Update (and
// UpdateMany, per lease) returns when the stored counter differs from the expected one: it
// carries the lease as the store holds it, so that the caller can tell a write of its own whose
// outcome it did not learn (the stored lease has its owner and epoch: see Manager) from another
// worker's. Stores in this repository return it; a caller must also accept a bare ErrConflict.
type ConflictError struct {
	Projection, ShardID string
	Counter             int64  // the counter the write expected
	Stored              *Lease // as stored when the condition failed; nil when the lease is missing
}

func (e *ConflictError) Error() string {
	if e.Stored == nil {
		return fmt.Sprintf("%v: projection %q shard %q: no such lease (expected counter %d)", ErrConflict, e.Projection, e.ShardID, e.Counter)
	}
	owner := e.Stored.Owner
	if owner == "" {
		owner = "none"
	}
	return fmt.Sprintf("%v: projection %q shard %q: counter is %d (owner %s, epoch %d), the write expected %d",
		ErrConflict, e.Projection, e.ShardID, e.Stored.Counter, owner, e.Stored.Epoch, e.Counter)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// NewConflict returns the *ConflictError of a write of l (the lease as the writer read it)
// that met stored (nil: missing). stored is copied.
func NewConflict(l Lease, stored *Lease) *ConflictError {
	e := &ConflictError{Projection: l.Projection, ShardID: l.ShardID, Counter: l.Counter}
	if stored != nil {
		c := *stored
		c.ParentIDs = append([]string(nil), stored.ParentIDs...)
		e.Stored = &c
	}
	return e
}

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
	// Module is the owner's handler identity (WithModule; "sha256:<hex>" of the module bytes
	// in projhost), written with every take and renewal; "" when free, or when the owner runs
	// without an identity. Workers refuse to share a projection with a live owner of another
	// module (ErrModuleConflict).
	Module string
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
	// lease is missing (a *ConflictError). A store whose writes can have an unknown outcome (a
	// network store: the request applied, the answer lost, the client retried) must, when a
	// retry's condition fails, read the lease and return success when it holds exactly l with
	// counter l.Counter+1: only this write can have moved the counter from l.Counter there.
	// Any other error means the write may or may not have been applied.
	Update(ctx context.Context, l Lease) (Lease, error)
}

// BatchUpdater is an optional interface of a LeaseStore that performs many Updates in one
// call, each conditional on its own counter (not all-or-nothing). The Manager renews and takes
// leases through it when the store implements it, in calls of at most MaxBatch leases; without
// it, it calls Update, a bounded number at a time. A store implements it when one call is much
// cheaper than len(ls) Updates: the embedded store writes the batch in one SQLite transaction
// (one lock acquisition and one commit instead of one per lease). DynamoDB has no multi-item
// write with a condition per item that is not all-or-nothing (TransactWriteItems fails as a
// whole when one condition fails; BatchWriteItem takes no conditions), so its store does not
// implement it.
type BatchUpdater interface {
	// UpdateMany applies Update to every lease of ls (distinct shards of one projection, at
	// most MaxBatch) and returns one result per lease, in the order of ls: the stored lease, or
	// an error wrapping ErrConflict when that lease's counter differed or it is missing. A
	// non-nil error means the call as a whole failed (the store unreachable, ctx done) and no
	// lease of ls is known to have been written; results are then nil.
	UpdateMany(ctx context.Context, ls []Lease) ([]UpdateResult, error)
}

// MaxBatch is the most leases the Manager passes to one BatchUpdater.UpdateMany call. It bounds
// how long one call holds a store's write lock (the embedded store: about 2.5 ms for 100
// leases), so that other workers' lease writes are never queued long behind it.
const MaxBatch = 100

// UpdateResult is the outcome of one lease of BatchUpdater.UpdateMany.
type UpdateResult struct {
	Lease Lease // as stored (counter incremented), when Err is nil
	Err   error // wraps ErrConflict when the lease changed or is missing
}

// ErrModuleConflict is wrapped by the *ModuleConflictError a Manager with a module identity
// (WithModule) returns from Round and Run when another worker is live on the projection with a
// different module.
var ErrModuleConflict = errors.New("shardmap: another worker runs this projection with a different module")

// ModuleConflictError says which live worker runs which module. Run ends with it; the worker
// holds no lease then (it took none, or handed back those it had just taken).
type ModuleConflictError struct {
	Projection  string
	Module      string // this worker's module
	OtherWorker string // the live owner seen
	OtherModule string // its module
	ShardID     string // one of its leases
}

func (e *ModuleConflictError) Error() string {
	return fmt.Sprintf("projection %q is already running on worker %q with module %s (shard %s), not this worker's module %s: "+
		"one projection name cannot mix two handler versions in one read model; stop every worker of %q and restart them all with the same module, "+
		"or run the new module under another projection name", e.Projection, e.OtherWorker, e.OtherModule, e.ShardID, e.Module, e.Projection)
}

// Unwrap returns ErrModuleConflict.
func (e *ModuleConflictError) Unwrap() error { return ErrModuleConflict }
