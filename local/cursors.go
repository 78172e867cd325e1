package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/source"
)

// Cursors is the cursorstore.Store of a Store: table cursors. Claim, Save and Stop read and
// write the row in one IMMEDIATE transaction; Resume is one UPDATE. Safe for concurrent use.
type Cursors struct{ s *Store }

var _ cursorstore.Store = (*Cursors)(nil)

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// getCursor reads a cursor row; a missing row is Seq "" Epoch 0, not stopped.
func getCursor(ctx context.Context, q queryer, projection, shardID string) (cursorstore.Cursor, error) {
	c := cursorstore.Cursor{Projection: projection, ShardID: shardID}
	err := q.QueryRowContext(ctx, `SELECT seq, epoch, stopped, stopped_ms FROM cursors WHERE projection = ? AND shard_id = ?`,
		projection, shardID).Scan(&c.Seq, &c.Epoch, &c.Stopped, &c.StoppedMs)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	return c, err
}

// putCursor stores c's Seq and Epoch; the stopped state is left as it is (a new row is not
// stopped).
func putCursor(ctx context.Context, tx *sql.Tx, c cursorstore.Cursor) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cursors (projection, shard_id, seq, epoch, updated_ms)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (projection, shard_id)
		DO UPDATE SET seq = excluded.seq, epoch = excluded.epoch, updated_ms = excluded.updated_ms`,
		c.Projection, c.ShardID, c.Seq, c.Epoch, nowMs())
	return err
}

// heldCursor reads the cursor for its holder: cursorstore.ErrFenced unless the stored epoch
// (0 for a missing cursor) is epoch.
func heldCursor(ctx context.Context, tx *sql.Tx, projection, shardID string, epoch int64) (cursorstore.Cursor, error) {
	c, err := getCursor(ctx, tx, projection, shardID)
	if err != nil {
		return c, err
	}
	if c.Epoch != epoch {
		return c, fmt.Errorf("epoch %d does not hold the cursor (stored epoch %d): %w", epoch, c.Epoch, cursorstore.ErrFenced)
	}
	return c, nil
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
		c, err := heldCursor(ctx, tx, projection, shardID, epoch)
		if err != nil {
			return err
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

// Stop records reason as the cursor's stopped state, with the current time, if the stored epoch
// equals epoch (a missing cursor has epoch 0; Stop with epoch 0 then creates it):
// cursorstore.ErrFenced otherwise. Seq and Epoch are not changed. An empty reason is refused with
// ErrInvalid. Stopping a stopped cursor replaces its reason and time.
func (cs *Cursors) Stop(ctx context.Context, projection, shardID string, epoch int64, reason string) error {
	if reason == "" {
		return fmt.Errorf("local: stop cursor %s/%s: empty reason: %w", projection, shardID, ErrInvalid)
	}
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		c, err := heldCursor(ctx, tx, projection, shardID, epoch)
		if err != nil {
			return err
		}
		if err := putCursor(ctx, tx, c); err != nil { // creates the row when missing
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE cursors SET stopped = ?, stopped_ms = ? WHERE projection = ? AND shard_id = ?`,
			reason, nowMs(), projection, shardID)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: stop cursor %s/%s: %w", projection, shardID, err)
	}
	return nil
}

// Resume clears the cursor's stopped state (not fenced). A cursor that is not stopped, or does
// not exist, is left as it is.
func (cs *Cursors) Resume(ctx context.Context, projection, shardID string) error {
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE cursors SET stopped = '', stopped_ms = 0
			WHERE projection = ? AND shard_id = ? AND stopped != ''`, projection, shardID)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: resume cursor %s/%s: %w", projection, shardID, err)
	}
	return nil
}

// SetPaused pauses or lifts the pause of shardID ("" = the projection as a whole): a row of
// table pauses per pause, shard_id ” for the projection's. Idempotent, not fenced.
func (cs *Cursors) SetPaused(ctx context.Context, projection, shardID string, paused bool) error {
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		if paused {
			_, err := tx.ExecContext(ctx, `INSERT INTO pauses (projection, shard_id, paused_ms) VALUES (?, ?, ?)
				ON CONFLICT (projection, shard_id) DO NOTHING`, projection, shardID, nowMs())
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM pauses WHERE projection = ? AND shard_id = ?`, projection, shardID)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: set the pause of %s shard %q to %v: %w", projection, shardID, paused, err)
	}
	return nil
}

// Pauses reads the projection's rows of table pauses (one query).
func (cs *Cursors) Pauses(ctx context.Context, projection string) (cursorstore.Pauses, error) {
	var p cursorstore.Pauses
	rows, err := cs.s.db.QueryContext(ctx, `SELECT shard_id FROM pauses WHERE projection = ? ORDER BY shard_id`, projection)
	if err != nil {
		return p, fmt.Errorf("local: read the pauses of %s: %w", projection, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return p, fmt.Errorf("local: read the pauses of %s: %w", projection, err)
		}
		if id == "" {
			p.All = true
		} else {
			p.Shards = append(p.Shards, id)
		}
	}
	if err := rows.Err(); err != nil {
		return p, fmt.Errorf("local: read the pauses of %s: %w", projection, err)
	}
	return p, nil
}

// Reset raises the stored epoch to epoch (cursorstore.ErrFenced when it is greater) and stores
// seq ("" = nothing applied; otherwise a decimal number: ErrInvalid), in one transaction. The
// stopped state is kept.
func (cs *Cursors) Reset(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	if seq != "" && !validSeq(seq) {
		return fmt.Errorf("local: reset cursor %s/%s: sequence number %q is not a decimal number: %w",
			projection, shardID, seq, ErrInvalid)
	}
	err := cs.s.write(ctx, func(tx *sql.Tx) error {
		c, err := getCursor(ctx, tx, projection, shardID)
		if err != nil {
			return err
		}
		if c.Epoch > epoch {
			return fmt.Errorf("epoch %d is older than the stored %d: %w", epoch, c.Epoch, cursorstore.ErrFenced)
		}
		c.Epoch, c.Seq = epoch, seq
		return putCursor(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("local: reset cursor %s/%s: %w", projection, shardID, err)
	}
	return nil
}
