package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/source"
)

// Cursors is the cursorstore.Store of a Store: table cursors. Claim and Save read and write the
// row in one IMMEDIATE transaction. Safe for concurrent use.
type Cursors struct{ s *Store }

var _ cursorstore.Store = (*Cursors)(nil)

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// getCursor reads a cursor row; a missing row is Seq "" Epoch 0.
func getCursor(ctx context.Context, q queryer, projection, shardID string) (cursorstore.Cursor, error) {
	c := cursorstore.Cursor{Projection: projection, ShardID: shardID}
	err := q.QueryRowContext(ctx, `SELECT seq, epoch FROM cursors WHERE projection = ? AND shard_id = ?`,
		projection, shardID).Scan(&c.Seq, &c.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	return c, err
}

func putCursor(ctx context.Context, tx *sql.Tx, c cursorstore.Cursor) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cursors (projection, shard_id, seq, epoch, updated_ms)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (projection, shard_id)
		DO UPDATE SET seq = excluded.seq, epoch = excluded.epoch, updated_ms = excluded.updated_ms`,
		c.Projection, c.ShardID, c.Seq, c.Epoch, nowMs())
	return err
}

// Get returns the cursor; a missing cursor is Seq "" with Epoch 0.
func (cs *Cursors) Get(ctx context.Context, projection, shardID string) (cursorstore.Cursor, error) {
	c, err := getCursor(ctx, cs.s.db, projection, shardID)
	if err != nil {
		return c, fmt.Errorf("local: get cursor %s/%s: %w", projection, shardID, err)
	}
	return c, nil
}

// Claim raises the stored epoch to epoch (creating the cursor when missing) and returns the
// cursor. cursorstore.ErrFenced when the stored epoch is greater.
func (cs *Cursors) Claim(ctx context.Context, projection, shardID string, epoch int64) (cursorstore.Cursor, error) {
	var c cursorstore.Cursor
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if c, err = getCursor(ctx, tx, projection, shardID); err != nil {
			return err
		}
		if c.Epoch > epoch {
			return fmt.Errorf("epoch %d is older than the stored %d: %w", epoch, c.Epoch, cursorstore.ErrFenced)
		}
		c.Epoch = epoch
		return putCursor(ctx, tx, c)
	})
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("local: claim cursor %s/%s: %w", projection, shardID, err)
	}
	return c, nil
}

// Save stores seq if the stored epoch equals epoch (cursorstore.ErrFenced otherwise) and seq is
// not below the stored one (cursorstore.ErrBackwards). seq must be a decimal number (ErrInvalid).
func (cs *Cursors) Save(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	if !validSeq(seq) {
		return fmt.Errorf("local: save cursor %s/%s: sequence number %q is not a decimal number: %w",
			projection, shardID, seq, ErrInvalid)
	}
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		c, err := getCursor(ctx, tx, projection, shardID)
		if err != nil {
			return err
		}
		if c.Epoch != epoch {
			return fmt.Errorf("epoch %d does not hold the cursor (stored epoch %d): %w", epoch, c.Epoch, cursorstore.ErrFenced)
		}
		if source.CompareSeq(seq, c.Seq) < 0 {
			return fmt.Errorf("seq %s is below the stored %s: %w", seq, c.Seq, cursorstore.ErrBackwards)
		}
		c.Seq = seq
		return putCursor(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("local: save cursor %s/%s: %w", projection, shardID, err)
	}
	return nil
}
