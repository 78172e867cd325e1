// Package cursorstore persists per-(projection, shard) cursors: the sequence number of the last
// event whose effects are applied (DESIGN §3).
//
// Cursors are fenced with the shard's lease epoch: a new owner first calls Claim with its epoch,
// which raises the epoch stored on the cursor item; from then on a Save by any older epoch (a
// zombie worker) fails with ErrFenced, so a cursor can never move backwards because of a zombie.
package cursorstore

import (
	"context"
	"errors"
)

// ErrFenced is returned when the caller's epoch is older than the one stored on the cursor
// (another worker took the shard). The caller must stop processing the shard at once.
var ErrFenced = errors.New("cursorstore: fenced: a newer lease owner claimed this shard")

// Cursor is a shard's checkpoint.
type Cursor struct {
	Projection string
	ShardID    string
	Seq        string // last applied sequence number; "" = nothing applied yet
	Epoch      int64  // epoch of the owner that last claimed or saved it

	// Stopped is why the shard was stopped by the stop error policy ("" = not stopped): the
	// handler error, one line. A stopped shard keeps its lease (its owner renews it) but is not
	// processed by any worker until Resume clears it. Claim and Save keep it unchanged.
	Stopped string
	// StoppedMs is when Stop was called, ms since the Unix epoch (0 when not stopped).
	StoppedMs int64
}

// Store persists cursors. Implementations are safe for concurrent use and must pass
// cursorstore/cursortest.
type Store interface {
	// Get returns the cursor; a missing cursor is returned as Seq "" with Epoch 0, not an error.
	Get(ctx context.Context, projection, shardID string) (Cursor, error)
	// Claim raises the stored epoch to epoch (creating the cursor when missing) and returns the
	// cursor. ErrFenced when the stored epoch is already greater than epoch. Claiming with the
	// stored epoch again is allowed (idempotent).
	Claim(ctx context.Context, projection, shardID string, epoch int64) (Cursor, error)
	// Save stores seq if the stored epoch equals epoch; ErrFenced otherwise. Saving a sequence
	// number lower than the stored one is refused with an error wrapping ErrBackwards.
	Save(ctx context.Context, projection, shardID string, epoch int64, seq string) error
	// Stop records reason (non-empty) as the cursor's Stopped state, with the current time, if
	// the stored epoch equals epoch; ErrFenced otherwise. The cursor's Seq is not changed.
	Stop(ctx context.Context, projection, shardID string, epoch int64, reason string) error
	// Resume clears the Stopped state (an operator's command: not fenced). Resuming a cursor
	// that is not stopped, or does not exist, is not an error and changes nothing.
	Resume(ctx context.Context, projection, shardID string) error

	// SetPaused pauses (paused true) or lifts the pause of (false) one shard, or with shardID
	// "" the projection as a whole (Pauses.All; lifting it leaves the shards paused one by one
	// paused). An operator's command: not fenced, idempotent, and independent of the cursor
	// (a shard with no cursor can be paused). The pause is kept per projection, apart from
	// the cursors, so that a projection-wide pause covers shards that have no cursor yet.
	SetPaused(ctx context.Context, projection, shardID string, paused bool) error
	// Pauses returns the projection's pause state in one read (workers poll it about once a
	// second): no pause is the zero Pauses, not an error.
	Pauses(ctx context.Context, projection string) (Pauses, error)
	// Reset sets the cursor to seq in either direction ("" = nothing applied), fenced like
	// Claim: it raises the stored epoch to epoch (ErrFenced when the stored epoch is greater)
	// and stores seq, keeping the stopped state. An operator's rewind (manage.Reset) after
	// it revoked the shard's lease; workers never call it.
	Reset(ctx context.Context, projection, shardID string, epoch int64, seq string) error
}

// Pauses is a projection's pause state (SetPaused): an operator's request that the workers
// handle nothing of the paused shards until it is lifted.
type Pauses struct {
	// All: the projection as a whole is paused, every shard it has and every shard that
	// appears later (a split or merge child) included.
	All bool
	// Shards are the shards paused one by one, sorted by id (paused whatever All says).
	Shards []string
}

// Paused reports whether shardID is paused, as a shard of its own or by the projection's pause.
func (p Pauses) Paused(shardID string) bool {
	if p.All {
		return true
	}
	for _, s := range p.Shards {
		if s == shardID {
			return true
		}
	}
	return false
}

// Any reports whether anything of the projection is paused.
func (p Pauses) Any() bool { return p.All || len(p.Shards) > 0 }

// ErrBackwards is returned by Save for a sequence number below the stored one.
var ErrBackwards = errors.New("cursorstore: refusing to move a cursor backwards")
