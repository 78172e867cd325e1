// Package readmodel stores the documents projections produce: JSON objects addressed by
// (projection, collection, key).
//
// Writes are fenced (DESIGN §3): each Apply carries the shard, the writer's lease epoch and the
// sequence number of the last event the mutations include. Implementations make a replayed
// Apply (same or lower sequence from the same shard) change nothing, and refuse an Apply from a
// stale epoch with ErrFenced, so read models get an exactly-once effect on top of at-least-once
// delivery.
package readmodel

import (
	"context"
	"errors"
	"fmt"

	"github.com/projhost/projhost/event"
)

// ErrFenced is returned by Apply when a newer lease owner has written for the shard.
var ErrFenced = errors.New("readmodel: fenced: a newer lease owner wrote for this shard")

// ErrRejected is wrapped by a store's write errors that retrying cannot fix: the store refused
// a write as invalid (DynamoDB: a 400 ValidationException, such as an item over 400 KB). The
// per-shard core does not retry such a commit: it charges the refused document to the event
// whose output it was (the error policy applies). Errors naming the document are a
// *RejectedError.
var ErrRejected = errors.New("readmodel: write refused by the store as invalid")

// RejectedError is a write the store refused as invalid, naming the refused mutation's
// document (Collection/Key; both "" when the store could not tell which). It wraps
// ErrRejected and the store's error.
type RejectedError struct {
	Collection, Key string
	Err             error
}

func (e *RejectedError) Error() string {
	if e.Collection == "" && e.Key == "" {
		return fmt.Sprintf("%v: %v", ErrRejected, e.Err)
	}
	return fmt.Sprintf("%v: document %s/%s: %v", ErrRejected, e.Collection, e.Key, e.Err)
}

// Unwrap returns ErrRejected and the store's error.
func (e *RejectedError) Unwrap() []error { return []error{ErrRejected, e.Err} }

// Mutation is one write (an alias of event.Mutation). Doc is a JSON object; nil means delete.
type Mutation = event.Mutation

// Write is the set of mutations one shard produced up to and including sequence number Seq.
type Write struct {
	Projection string
	ShardID    string
	Epoch      int64  // the writer's lease epoch
	Seq        string // last sequence number whose effects the mutations include
	Mutations  []Mutation

	// Replay, when not "", marks a dead-letter replay: Mutations are the effect of re-handling
	// the dead-lettered event of ShardID with sequence number Replay (below Seq, which is then
	// the shard's current cursor: a replay write carries no new events). Stores make a replay
	// idempotent per (shard, Replay) instead of by Seq: a repeated Write with the same Replay
	// changes nothing it already changed (DynamoDB: a per-item replay marker), and the write is
	// still fenced by Epoch. A transactional store that also holds the dead letters (the
	// embedded store) marks the letter deadletter.StateReplayed in the same transaction as the
	// mutations (see projection/RATIONALE.md).
	Replay string
}

// Doc is one stored document (an alias of event.Doc).
type Doc = event.Doc

// Store holds read models. Implementations are safe for concurrent use and must pass
// readmodel/readmodeltest.
type Store interface {
	// Get returns the document at collection/key, or found=false.
	Get(ctx context.Context, projection, collection, key string) (doc []byte, found bool, err error)
	// Apply applies w's mutations in order (last write to a key wins). ErrFenced when w.Epoch is
	// older than an epoch already seen for w.ShardID. Mutations already applied from the same
	// shard at a sequence >= w.Seq are skipped.
	Apply(ctx context.Context, w Write) error
	// Scan returns the documents of a collection ordered by key ("" collection = all, ordered by
	// collection then key).
	Scan(ctx context.Context, projection, collection string) ([]Doc, error)
}

// Committer is implemented by stores that also hold cursors and can commit a Write together with
// the shard's cursor (set to w.Seq) in one transaction, fenced by w.Epoch (the embedded SQLite
// store). The runner prefers it to Apply followed by a cursor save: it makes local runs
// exactly-once without relying on per-item markers.
type Committer interface {
	// Commit applies w and saves the cursor of (w.Projection, w.ShardID) at w.Seq atomically.
	// Errors: ErrFenced (wrapping cursorstore.ErrFenced too) when w.Epoch is stale.
	Commit(ctx context.Context, w Write) error
}

// WriteClaimer is implemented by stores without transactions (DynamoDB) where an Apply can stop
// half-way (a crash between item writes) or land late (a zombie's in-flight writes).
//
// A new owner calls ClaimWrites with its epoch before it reads anything of the shard: it raises
// the shard's write fence (ErrFenced when a newer epoch holds it), so no Apply of an older epoch
// can begin afterwards, and returns the highest sequence number an Apply of the shard began with
// ("" when none). When that is above the cursor, the runner must make its first Write end
// exactly there: items the interrupted Apply already wrote carry that marker and are skipped,
// the others are written, and no event counts twice.
type WriteClaimer interface {
	ClaimWrites(ctx context.Context, projection, shardID string, epoch int64) (highWater string, err error)
}

// Resetter is implemented by read models an operator can rewind (manage.Reset and
// manage.Rebuild, after they revoked the shard's lease). Backends declare it in
// store.Stores.Resetter.
type Resetter interface {
	// ResetWrites fences the shard's writes at epoch, as ClaimWrites does (ErrFenced when a
	// newer epoch holds them; no Apply or Commit of an older epoch succeeds afterwards), and
	// forgets which of the shard's writes were applied: after the shard's cursor is moved back,
	// the events after it are applied again when they are handled again, instead of being
	// skipped as already applied (the transactional store's last applied sequence number, the
	// DynamoDB per-item markers and the interrupted write's high-water mark). The documents
	// are not changed.
	ResetWrites(ctx context.Context, projection, shardID string, epoch int64) error
	// ClearDocs deletes every document of the projection (its fences stay: call ResetWrites
	// for every shard first, so that no write of an older owner lands after the clearing).
	ClearDocs(ctx context.Context, projection string) error
}
