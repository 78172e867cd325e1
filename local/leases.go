package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/projhost/projhost/shardmap"
)

// Leases is the shardmap.LeaseStore of a Store: table leases of leases.db, a file of its own so
// that renewals never wait for read-model commits (package doc). Every write is one conditional
// statement (INSERT ... ON CONFLICT DO NOTHING, UPDATE ... WHERE counter = ?); UpdateMany
// runs many such UPDATEs in one transaction. Safe for concurrent use.
type Leases struct{ s *Store }

var (
	_ shardmap.LeaseStore   = (*Leases)(nil)
	_ shardmap.BatchUpdater = (*Leases)(nil)
)

// List returns every lease of a projection, ordered by shard id.
func (l *Leases) List(ctx context.Context, projection string) ([]shardmap.Lease, error) {
	rows, err := l.s.ldb.QueryContext(ctx, `SELECT shard_id, owner, counter, epoch, parent_ids, state, module
		FROM leases WHERE projection = ? ORDER BY shard_id`, projection)
	if err != nil {
		return nil, fmt.Errorf("local: list leases of %q: %w", projection, err)
	}
	defer rows.Close()
	var out []shardmap.Lease
	for rows.Next() {
		le := shardmap.Lease{Projection: projection}
		var parents, state string
		if err := rows.Scan(&le.ShardID, &le.Owner, &le.Counter, &le.Epoch, &parents, &state, &le.Module); err != nil {
			return nil, fmt.Errorf("local: list leases of %q: %w", projection, err)
		}
		if err := json.Unmarshal([]byte(parents), &le.ParentIDs); err != nil {
			return nil, fmt.Errorf("local: lease %s/%s: parent_ids %q is not a JSON array of strings: %w",
				projection, le.ShardID, parents, err)
		}
		le.State = shardmap.State(state)
		out = append(out, le)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("local: list leases of %q: %w", projection, err)
	}
	return out, nil
}

func parentsJSON(ids []string) string {
	if len(ids) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ids) // a []string always marshals
	return string(b)
}

// Create stores le if no lease exists for its (projection, shard); shardmap.ErrExists otherwise.
func (l *Leases) Create(ctx context.Context, le shardmap.Lease) error {
	var n int64
	err := l.s.writeLeases(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO leases
			(projection, shard_id, owner, counter, epoch, parent_ids, state, module) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (projection, shard_id) DO NOTHING`,
			le.Projection, le.ShardID, le.Owner, le.Counter, le.Epoch, parentsJSON(le.ParentIDs), string(le.State), le.Module)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("local: create lease %s/%s: %w", le.Projection, le.ShardID, err)
	}
	if n == 0 {
		return fmt.Errorf("local: create lease %s/%s: %w", le.Projection, le.ShardID, shardmap.ErrExists)
	}
	return nil
}

// updateSQL is the conditional write of one lease.
const updateSQL = `UPDATE leases
	SET owner = ?, counter = counter + 1, epoch = ?, parent_ids = ?, state = ?, module = ?
	WHERE projection = ? AND shard_id = ? AND counter = ?`

func updateArgs(le shardmap.Lease) []any {
	return []any{le.Owner, le.Epoch, parentsJSON(le.ParentIDs), string(le.State), le.Module, le.Projection, le.ShardID, le.Counter}
}

// storedLease reads the lease of le's shard as tx holds it (nil when missing), for the
// *shardmap.ConflictError of a write whose condition failed.
func storedLease(ctx context.Context, tx *sql.Tx, le shardmap.Lease) (*shardmap.Lease, error) {
	stored := shardmap.Lease{Projection: le.Projection, ShardID: le.ShardID}
	var parents, state string
	err := tx.QueryRowContext(ctx, `SELECT owner, counter, epoch, parent_ids, state, module FROM leases
		WHERE projection = ? AND shard_id = ?`, le.Projection, le.ShardID).
		Scan(&stored.Owner, &stored.Counter, &stored.Epoch, &parents, &state, &stored.Module)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(parents), &stored.ParentIDs); err != nil {
		return nil, fmt.Errorf("local: lease %s/%s: parent_ids %q is not a JSON array of strings: %w",
			le.Projection, le.ShardID, parents, err)
	}
	stored.State = shardmap.State(state)
	return &stored, nil
}

// Update replaces the lease if its stored counter equals le.Counter, storing le.Counter+1, and
// returns the stored lease. A *shardmap.ConflictError (wrapping shardmap.ErrConflict) when the
// counter differs or the lease is missing.
func (l *Leases) Update(ctx context.Context, le shardmap.Lease) (shardmap.Lease, error) {
	res, err := l.UpdateMany(ctx, []shardmap.Lease{le})
	if err != nil {
		return shardmap.Lease{}, fmt.Errorf("local: update lease %s/%s: %w", le.Projection, le.ShardID, err)
	}
	return res[0].Lease, res[0].Err
}

// UpdateMany is Update of every lease of ls in one transaction of leases.db
// (shardmap.BatchUpdater): each UPDATE is conditional on its own counter, and a lease whose
// counter differs gets shardmap.ErrConflict in its result without affecting the others. The
// whole call fails (no lease written) only when the transaction does: ctx done, ErrBusy past
// the busy timeout, a SQLite error. The transaction holds leases.db's write lock for its
// statements only, about 25 us per lease (shardmap.MaxBatch leases: ~2.5 ms, measured by
// BenchmarkLeaseRenewRound on the shared 2-core machine under load; one Update per lease:
// ~90 us each).
func (l *Leases) UpdateMany(ctx context.Context, ls []shardmap.Lease) ([]shardmap.UpdateResult, error) {
	out := make([]shardmap.UpdateResult, len(ls))
	if len(ls) == 0 {
		return out, nil
	}
	err := l.s.writeLeases(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, updateSQL)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, le := range ls {
			res, err := st.ExecContext(ctx, updateArgs(le)...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				stored, err := storedLease(ctx, tx, le)
				if err != nil {
					return err
				}
				out[i] = shardmap.UpdateResult{Err: fmt.Errorf("local: update lease: %w", shardmap.NewConflict(le, stored))}
				continue
			}
			le.Counter++
			le.ParentIDs = slices.Clone(le.ParentIDs)
			out[i] = shardmap.UpdateResult{Lease: le}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("local: update %d leases: %w", len(ls), err)
	}
	return out, nil
}

// Projections returns the names of the projections that have leases in the store, sorted.
func (l *Leases) Projections(ctx context.Context) ([]string, error) {
	rows, err := l.s.ldb.QueryContext(ctx, `SELECT DISTINCT projection FROM leases ORDER BY projection`)
	if err != nil {
		return nil, fmt.Errorf("local: list projections: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("local: list projections: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
