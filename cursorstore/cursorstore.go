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
}

// ErrBackwards is returned by Save for a sequence number below the stored one.
var ErrBackwards = errors.New("cursorstore: refusing to move a cursor backwards")
