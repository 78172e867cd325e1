package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/projhost/projhost/deadletter"
)

// DeadLetters is the deadletter.Store of a Store: table deadletters. Put is one upsert,
// Transition one conditional UPDATE (read back in the same transaction to tell ErrNotFound from
// ErrState). ReadModels.Commit and Apply with readmodel.Write.Replay set move a letter to
// deadletter.StateReplayed in the transaction that applies its replay. Safe for concurrent use,
// also by several processes.
type DeadLetters struct{ s *Store }

var _ deadletter.Store = (*DeadLetters)(nil)

// DeadLetters returns the dead-letter store (deadletter.Store) of this database.
func (s *Store) DeadLetters() *DeadLetters { return &DeadLetters{s: s} }

const letterColumns = `shard_id, seq, partition_key, arrival_ms, data, error_kind, error, attempts,
	first_failure_ms, last_failure_ms, state, replayed_seq`

// msOrNull stores a time as ms since the Unix epoch, the zero time as NULL.
func msOrNull(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func timeOrZero(ms sql.NullInt64) time.Time {
	if !ms.Valid {
		return time.Time{}
	}
	return time.UnixMilli(ms.Int64).UTC()
}

// Put creates the letter or replaces the stored one, keeping the stored FirstFailure when it is
// earlier (a zero FirstFailure is unknown: the stored one is kept). Errors: an error wrapping
// deadletter.ErrInvalid (see deadletter.Letter.Validate), ErrBusy, SQLite errors.
func (d *DeadLetters) Put(ctx context.Context, l deadletter.Letter) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("local: put dead letter: %w", err)
	}
	data := l.Data
	if data == nil {
		data = []byte{} // the column is NOT NULL
	}
	err := d.s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO deadletters (projection, `+letterColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (projection, shard_id, seq) DO UPDATE SET
				partition_key = excluded.partition_key, arrival_ms = excluded.arrival_ms, data = excluded.data,
				error_kind = excluded.error_kind, error = excluded.error, attempts = excluded.attempts,
				first_failure_ms = CASE
					WHEN excluded.first_failure_ms IS NULL THEN first_failure_ms
					WHEN first_failure_ms IS NOT NULL AND first_failure_ms < excluded.first_failure_ms THEN first_failure_ms
					ELSE excluded.first_failure_ms END,
				last_failure_ms = excluded.last_failure_ms, state = excluded.state, replayed_seq = excluded.replayed_seq`,
			l.Projection, l.ShardID, l.Seq, l.PartitionKey, l.ArrivalMs, data, l.ErrorKind, l.Error, l.Attempts,
			msOrNull(l.FirstFailure), msOrNull(l.LastFailure), string(l.State), l.ReplayedSeq)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: put dead letter %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
	}
	return nil
}

type rowScanner interface{ Scan(dest ...any) error }

func scanLetter(projection string, r rowScanner) (deadletter.Letter, error) {
	l := deadletter.Letter{Projection: projection}
	var first, last sql.NullInt64
	var state string
	err := r.Scan(&l.ShardID, &l.Seq, &l.PartitionKey, &l.ArrivalMs, &l.Data, &l.ErrorKind, &l.Error, &l.Attempts,
		&first, &last, &state, &l.ReplayedSeq)
	l.FirstFailure, l.LastFailure, l.State = timeOrZero(first), timeOrZero(last), deadletter.State(state)
	return l, err
}

// Get returns one letter. Errors: deadletter.ErrNotFound, deadletter.ErrInvalid for an invalid
// identity (see deadletter.ValidateKey), SQLite errors.
func (d *DeadLetters) Get(ctx context.Context, projection, shardID, seq string) (deadletter.Letter, error) {
	if err := deadletter.ValidateKey(projection, shardID, seq); err != nil {
		return deadletter.Letter{}, fmt.Errorf("local: get dead letter: %w", err)
	}
	l, err := scanLetter(projection, d.s.db.QueryRowContext(ctx, `SELECT `+letterColumns+` FROM deadletters
		WHERE projection = ? AND shard_id = ? AND seq = ?`, projection, shardID, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return deadletter.Letter{}, fmt.Errorf("local: dead letter %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
	}
	if err != nil {
		return deadletter.Letter{}, fmt.Errorf("local: get dead letter %s/%s/%s: %w", projection, shardID, seq, err)
	}
	return l, nil
}

// List returns the projection's letters matching f, ordered by shard id (bytes), then sequence
// number (numerically: valid sequence numbers have no leading zeros, so by length, then text).
// Errors: deadletter.ErrInvalid for an empty projection or an unknown f.State, SQLite errors.
func (d *DeadLetters) List(ctx context.Context, projection string, f deadletter.Filter) ([]deadletter.Letter, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("local: list dead letters: %w", err)
	}
	if projection == "" {
		return nil, fmt.Errorf("local: list dead letters: %w: empty projection", deadletter.ErrInvalid)
	}
	q := `SELECT ` + letterColumns + ` FROM deadletters WHERE projection = ?`
	args := []any{projection}
	if f.ShardID != "" {
		q += ` AND shard_id = ?`
		args = append(args, f.ShardID)
	}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	rows, err := d.s.db.QueryContext(ctx, q+` ORDER BY shard_id, length(seq), seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("local: list dead letters of %q: %w", projection, err)
	}
	defer rows.Close()
	var out []deadletter.Letter
	for rows.Next() {
		l, err := scanLetter(projection, rows)
		if err != nil {
			return nil, fmt.Errorf("local: list dead letters of %q: %w", projection, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("local: list dead letters of %q: %w", projection, err)
	}
	return out, nil
}

// Transition sets the letter's state to to if it is in one of from (and ReplayedSeq to
// replayedSeq when to is deadletter.StateReplayed), with one conditional UPDATE. Errors:
// deadletter.ErrNotFound, deadletter.ErrState, deadletter.ErrInvalid (see
// deadletter.ValidateTransition), ErrBusy, SQLite errors.
func (d *DeadLetters) Transition(ctx context.Context, projection, shardID, seq string, from []deadletter.State, to deadletter.State, replayedSeq string) error {
	if err := deadletter.ValidateTransition(projection, shardID, seq, from, to, replayedSeq); err != nil {
		return fmt.Errorf("local: transition dead letter: %w", err)
	}
	err := d.s.write(ctx, func(tx *sql.Tx) error {
		return transitionLetter(ctx, tx, projection, shardID, seq, from, to, replayedSeq)
	})
	if err != nil {
		return fmt.Errorf("local: transition dead letter %s/%s/%s to %s: %w", projection, shardID, seq, to, err)
	}
	return nil
}

// transitionLetter is Transition inside tx, for valid arguments.
func transitionLetter(ctx context.Context, tx *sql.Tx, projection, shardID, seq string, from []deadletter.State, to deadletter.State, replayedSeq string) error {
	args := []any{string(to), to == deadletter.StateReplayed, replayedSeq, projection, shardID, seq}
	for _, st := range from {
		args = append(args, string(st))
	}
	res, err := tx.ExecContext(ctx, `UPDATE deadletters SET state = ?,
		replayed_seq = CASE WHEN ? THEN ? ELSE replayed_seq END
		WHERE projection = ? AND shard_id = ? AND seq = ? AND state IN (?`+strings.Repeat(", ?", len(from)-1)+`)`, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	state, err := letterState(ctx, tx, projection, shardID, seq)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: it is %s, not %v", deadletter.ErrState, state, from)
}

// letterState returns the letter's state; an error wrapping deadletter.ErrNotFound when missing.
func letterState(ctx context.Context, q queryer, projection, shardID, seq string) (deadletter.State, error) {
	var state string
	err := q.QueryRowContext(ctx, `SELECT state FROM deadletters WHERE projection = ? AND shard_id = ? AND seq = ?`,
		projection, shardID, seq).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("dead letter %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
	}
	return deadletter.State(state), err
}
