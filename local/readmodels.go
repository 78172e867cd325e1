package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
)

// ReadModels is the readmodel.Store and readmodel.Committer of a Store: table docs, fenced by
// table applied (and by the cursor's epoch). Safe for concurrent use.
//
// Apply and Commit run in one IMMEDIATE transaction each. A shard's writes are fenced by the
// highest epoch seen for it, from earlier writes or from a cursor Claim, and skipped when their
// sequence number is not above both the last applied one and the saved cursor, so a write is
// applied entirely or not at all. A dead-letter replay write (readmodel.Write.Replay) is
// skipped instead when its letter (table deadletters) is replayed already, and marks it
// replayed in its transaction.
type ReadModels struct{ s *Store }

var (
	_ readmodel.Store     = (*ReadModels)(nil)
	_ readmodel.Committer = (*ReadModels)(nil)
)

// Get returns the document at collection/key, or found=false.
func (r *ReadModels) Get(ctx context.Context, projection, collection, key string) ([]byte, bool, error) {
	var doc string
	err := r.s.db.QueryRowContext(ctx, `SELECT doc FROM docs WHERE projection = ? AND collection = ? AND key = ?`,
		projection, collection, key).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("local: get %s/%s/%s: %w", projection, collection, key, err)
	}
	return []byte(doc), true, nil
}

// Scan returns the documents of a collection ordered by key ("" = all collections, ordered by
// collection then key). Keys order by their bytes.
func (r *ReadModels) Scan(ctx context.Context, projection, collection string) ([]readmodel.Doc, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if collection == "" {
		rows, err = r.s.db.QueryContext(ctx, `SELECT collection, key, doc FROM docs WHERE projection = ?
			ORDER BY collection, key`, projection)
	} else {
		rows, err = r.s.db.QueryContext(ctx, `SELECT collection, key, doc FROM docs
			WHERE projection = ? AND collection = ? ORDER BY key`, projection, collection)
	}
	if err != nil {
		return nil, fmt.Errorf("local: scan %s/%s: %w", projection, collection, err)
	}
	defer rows.Close()
	var out []readmodel.Doc
	for rows.Next() {
		var d readmodel.Doc
		var doc string
		if err := rows.Scan(&d.Collection, &d.Key, &doc); err != nil {
			return nil, fmt.Errorf("local: scan %s/%s: %w", projection, collection, err)
		}
		d.Doc = []byte(doc)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("local: scan %s/%s: %w", projection, collection, err)
	}
	return out, nil
}

// Apply applies w's mutations in order (last write to a key wins; a Mutation with an empty Doc
// deletes). readmodel.ErrFenced when w.Epoch is older than an epoch seen for w.ShardID; nothing
// happens when w.Seq is not above the shard's last applied sequence number (a replay).
// ErrInvalid for a malformed sequence number, an empty collection or key, or a document that is
// not a JSON object; then nothing is applied.
//
// With w.Replay set (a dead-letter replay), the mutations are applied whatever w.Seq is, and the
// dead letter (w.Projection, w.ShardID, w.Replay) moves from deadletter.StateReplayRequested to
// deadletter.StateReplayed with ReplayedSeq w.Seq, in the same transaction; when the letter is
// replayed already, nothing changes and Apply returns nil (so a repeated replay applies once).
// Errors then also: deadletter.ErrNotFound (no such letter), deadletter.ErrState (the letter is
// failed or dropped), ErrInvalid (w.Replay not a canonical sequence number, or above w.Seq).
func (r *ReadModels) Apply(ctx context.Context, w readmodel.Write) error {
	return r.apply(ctx, w, false)
}

// Commit applies w like Apply and sets the cursor of (w.Projection, w.ShardID) to w.Seq with
// epoch w.Epoch, in one transaction; the cursor's stopped state is kept. Errors: an error
// wrapping both readmodel.ErrFenced and cursorstore.ErrFenced when w.Epoch is older than the
// cursor's or the shard's last write's epoch; ErrInvalid as for Apply. A replay (w.Seq not
// above the cursor) changes nothing and returns nil. A Commit with an epoch newer than the
// cursor's raises it, like a Claim.
//
// With w.Replay set, Commit is Apply's dead-letter replay plus the cursor (epoch raised, Seq
// kept): w.Seq must be the stored cursor, since a replay write carries no new events (an error
// wrapping cursorstore.ErrBackwards when below it, ErrInvalid when above). A replay whose letter
// is replayed already changes nothing and returns nil, wherever the cursor is by then.
func (r *ReadModels) Commit(ctx context.Context, w readmodel.Write) error {
	return r.apply(ctx, w, true)
}

// shardState is what the fence of a write reads: the applied row and the cursor.
type shardState struct {
	appliedSeq   string
	appliedEpoch int64
	cur          cursorstore.Cursor
}

func (r *ReadModels) apply(ctx context.Context, w readmodel.Write, commit bool) error {
	if err := validateWrite(w); err != nil {
		return err
	}
	op := "apply"
	if commit {
		op = "commit"
	}
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		// Fence: the highest epoch seen for the shard, from writes or from a cursor claim.
		var st shardState
		err := tx.QueryRowContext(ctx, `SELECT seq, epoch FROM applied WHERE projection = ? AND shard_id = ?`,
			w.Projection, w.ShardID).Scan(&st.appliedSeq, &st.appliedEpoch)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if st.cur, err = getCursor(ctx, tx, w.Projection, w.ShardID); err != nil {
			return err
		}
		if fence := max(st.appliedEpoch, st.cur.Epoch); w.Epoch < fence {
			return fmt.Errorf("epoch %d is older than epoch %d seen for the shard: %w (%w)",
				w.Epoch, fence, readmodel.ErrFenced, cursorstore.ErrFenced)
		}
		if w.Replay != "" {
			return applyReplay(ctx, tx, w, commit, st)
		}
		done := st.appliedSeq
		if source.CompareSeq(st.cur.Seq, done) > 0 {
			done = st.cur.Seq
		}
		if done != "" && source.CompareSeq(w.Seq, done) <= 0 {
			// A replay: effects already applied. Still record the newer epoch as the fence.
			return raiseAppliedEpoch(ctx, tx, w, st)
		}
		if err := applyMutations(ctx, tx, w); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO applied (projection, shard_id, seq, epoch) VALUES (?, ?, ?, ?)
			ON CONFLICT (projection, shard_id) DO UPDATE SET seq = excluded.seq, epoch = excluded.epoch`,
			w.Projection, w.ShardID, w.Seq, w.Epoch); err != nil {
			return err
		}
		if commit {
			return putCursor(ctx, tx, cursorstore.Cursor{Projection: w.Projection, ShardID: w.ShardID, Seq: w.Seq, Epoch: w.Epoch})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local: %s %s/%s seq %s: %w", op, w.Projection, w.ShardID, w.Seq, err)
	}
	return nil
}

// raiseAppliedEpoch records w.Epoch as the shard's fence when it is newer, keeping the applied
// sequence number.
func raiseAppliedEpoch(ctx context.Context, tx *sql.Tx, w readmodel.Write, st shardState) error {
	if w.Epoch <= st.appliedEpoch {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO applied (projection, shard_id, seq, epoch) VALUES (?, ?, ?, ?)
		ON CONFLICT (projection, shard_id) DO UPDATE SET epoch = excluded.epoch`,
		w.Projection, w.ShardID, st.appliedSeq, w.Epoch)
	return err
}

// applyReplay applies a dead-letter replay write (past the epoch fence) inside tx: the letter
// w.Replay decides, not the sequence numbers.
func applyReplay(ctx context.Context, tx *sql.Tx, w readmodel.Write, commit bool, st shardState) error {
	state, err := letterState(ctx, tx, w.Projection, w.ShardID, w.Replay)
	if err != nil {
		return err
	}
	if state == deadletter.StateReplayed {
		return raiseAppliedEpoch(ctx, tx, w, st) // applied before: once is enough
	}
	if commit && w.Seq != st.cur.Seq {
		if source.CompareSeq(w.Seq, st.cur.Seq) < 0 {
			return fmt.Errorf("replay write at seq %s is below the cursor %s: %w", w.Seq, st.cur.Seq, cursorstore.ErrBackwards)
		}
		return fmt.Errorf("replay write at seq %s is not at the cursor %s (a replay carries no new events): %w",
			w.Seq, st.cur.Seq, ErrInvalid)
	}
	if err := transitionLetter(ctx, tx, w.Projection, w.ShardID, w.Replay,
		[]deadletter.State{deadletter.StateReplayRequested}, deadletter.StateReplayed, w.Seq); err != nil {
		return fmt.Errorf("replay of %s: %w", w.Replay, err)
	}
	if err := applyMutations(ctx, tx, w); err != nil {
		return err
	}
	if err := raiseAppliedEpoch(ctx, tx, w, st); err != nil {
		return err
	}
	if commit {
		st.cur.Epoch = w.Epoch
		return putCursor(ctx, tx, st.cur)
	}
	return nil
}

func applyMutations(ctx context.Context, tx *sql.Tx, w readmodel.Write) error {
	if len(w.Mutations) == 0 {
		return nil
	}
	put, err := tx.PrepareContext(ctx, `INSERT INTO docs (projection, collection, key, doc, shard_id, seq, updated_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (projection, collection, key) DO UPDATE SET
		doc = excluded.doc, shard_id = excluded.shard_id, seq = excluded.seq, updated_ms = excluded.updated_ms`)
	if err != nil {
		return err
	}
	defer put.Close()
	del, err := tx.PrepareContext(ctx, `DELETE FROM docs WHERE projection = ? AND collection = ? AND key = ?`)
	if err != nil {
		return err
	}
	defer del.Close()
	now := nowMs()
	for _, m := range w.Mutations {
		if len(m.Doc) == 0 {
			if _, err := del.ExecContext(ctx, w.Projection, m.Collection, m.Key); err != nil {
				return err
			}
			continue
		}
		// The document is bound as TEXT: SQLite's JSON functions read a BLOB as JSONB.
		if _, err := put.ExecContext(ctx, w.Projection, m.Collection, m.Key, string(m.Doc), w.ShardID, w.Seq, now); err != nil {
			return err
		}
	}
	return nil
}

// validateWrite checks w before any write: SQLite would store anything, but read models must stay
// queryable with json_extract.
func validateWrite(w readmodel.Write) error {
	if !validSeq(w.Seq) {
		return fmt.Errorf("local: write %s/%s: sequence number %q is not a decimal number: %w",
			w.Projection, w.ShardID, w.Seq, ErrInvalid)
	}
	if w.Replay != "" && (!event.ValidSeq(w.Replay) || source.CompareSeq(w.Replay, w.Seq) > 0) {
		return fmt.Errorf("local: write %s/%s seq %s: replay of %q: not a canonical sequence number at or below the write's: %w",
			w.Projection, w.ShardID, w.Seq, w.Replay, ErrInvalid)
	}
	for i, m := range w.Mutations {
		if m.Collection == "" || m.Key == "" {
			return fmt.Errorf("local: write %s/%s seq %s: mutation %d has an empty collection or key: %w",
				w.Projection, w.ShardID, w.Seq, i, ErrInvalid)
		}
		if len(m.Doc) > 0 && (!isObject(m.Doc) || !json.Valid(m.Doc)) {
			return fmt.Errorf("local: write %s/%s seq %s: document %s/%s is not a JSON object: %w",
				w.Projection, w.ShardID, w.Seq, m.Collection, m.Key, ErrInvalid)
		}
	}
	return nil
}

// isObject reports whether the first non-space byte of doc is '{'.
func isObject(doc []byte) bool {
	for _, c := range doc {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// ResetWrites fences the shard's writes at epoch (readmodel.ErrFenced when the applied row or
// the cursor holds a newer one) and forgets its last applied sequence number, in one
// transaction: writes are then skipped only up to the cursor, which the caller resets next.
func (r *ReadModels) ResetWrites(ctx context.Context, projection, shardID string, epoch int64) error {
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		var appliedEpoch int64
		err := tx.QueryRowContext(ctx, `SELECT epoch FROM applied WHERE projection = ? AND shard_id = ?`,
			projection, shardID).Scan(&appliedEpoch)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := getCursor(ctx, tx, projection, shardID)
		if err != nil {
			return err
		}
		if fence := max(appliedEpoch, cur.Epoch); epoch < fence {
			return fmt.Errorf("epoch %d is older than epoch %d seen for the shard: %w", epoch, fence, readmodel.ErrFenced)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO applied (projection, shard_id, seq, epoch) VALUES (?, ?, '', ?)
			ON CONFLICT (projection, shard_id) DO UPDATE SET seq = '', epoch = excluded.epoch`, projection, shardID, epoch)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: reset the writes of %s/%s: %w", projection, shardID, err)
	}
	return nil
}

// ClearDocs deletes every document of the projection (one transaction).
func (r *ReadModels) ClearDocs(ctx context.Context, projection string) error {
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM docs WHERE projection = ?`, projection)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: clear the documents of %s: %w", projection, err)
	}
	return nil
}
