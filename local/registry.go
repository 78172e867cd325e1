package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/projhost/projhost/registry"
)

// Registry is the registry.Store of a Store: tables module_versions and module_active of
// projhost.db. Add and Activate read and write in one IMMEDIATE transaction, so concurrent
// processes are serialised by SQLite's write lock: two Adds get two numbers, and of two
// Activates from the same counter the second sees the first's change. Safe for concurrent use.
type Registry struct{ s *Store }

var _ registry.Store = (*Registry)(nil)

// Registry returns the module registry (registry.Store) of this database.
func (s *Store) Registry() *Registry { return &Registry{s: s} }

// Add implements registry.Store.
func (r *Registry) Add(ctx context.Context, v registry.Version) (registry.Version, error) {
	if err := registry.CheckVersion(v); err != nil {
		return registry.Version{}, err
	}
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) + 1 FROM module_versions WHERE projection = ?`,
			v.Projection).Scan(&v.Number); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO module_versions (projection, version, sha256, size, abi, uploaded_ms, note)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, v.Projection, v.Number, v.SHA256, v.Size, v.ABI, v.UploadedMs, v.Note)
		return err
	})
	if err != nil {
		return registry.Version{}, fmt.Errorf("local: add a version of %s: %w", v.Projection, err)
	}
	return v, nil
}

// Versions implements registry.Store.
func (r *Registry) Versions(ctx context.Context, projection string) ([]registry.Version, error) {
	rows, err := r.s.db.QueryContext(ctx, `SELECT version, sha256, size, abi, uploaded_ms, note FROM module_versions
		WHERE projection = ? ORDER BY version`, projection)
	if err != nil {
		return nil, fmt.Errorf("local: list the versions of %s: %w", projection, r.s.wrapBusy(err))
	}
	defer rows.Close()
	var out []registry.Version
	for rows.Next() {
		v := registry.Version{Projection: projection}
		if err := rows.Scan(&v.Number, &v.SHA256, &v.Size, &v.ABI, &v.UploadedMs, &v.Note); err != nil {
			return nil, fmt.Errorf("local: list the versions of %s: %w", projection, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("local: list the versions of %s: %w", projection, r.s.wrapBusy(err))
	}
	return out, nil
}

func getActive(ctx context.Context, q queryer, projection string) (registry.Active, error) {
	a := registry.Active{Projection: projection}
	err := q.QueryRowContext(ctx, `SELECT version, previous, counter, changed_ms FROM module_active WHERE projection = ?`,
		projection).Scan(&a.Version, &a.Previous, &a.Counter, &a.ChangedMs)
	if errors.Is(err, sql.ErrNoRows) {
		return a, nil
	}
	return a, err
}

// Active implements registry.Store.
func (r *Registry) Active(ctx context.Context, projection string) (registry.Active, error) {
	a, err := getActive(ctx, r.s.db, projection)
	if err != nil {
		return a, fmt.Errorf("local: read the active version of %s: %w", projection, r.s.wrapBusy(err))
	}
	return a, nil
}

// Activate implements registry.Store.
func (r *Registry) Activate(ctx context.Context, projection string, n, expect int64) (registry.Active, error) {
	var out registry.Active
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM module_versions WHERE projection = ? AND version = ?`, projection, n).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s has no version %d", registry.ErrNoVersion, projection, n)
		}
		if err != nil {
			return err
		}
		a, err := getActive(ctx, tx, projection)
		if err != nil {
			return err
		}
		if a.Counter != expect {
			return &registry.ConflictError{Stored: a}
		}
		out = registry.Active{Projection: projection, Version: n, Previous: a.Version, Counter: a.Counter + 1, ChangedMs: nowMs()}
		_, err = tx.ExecContext(ctx, `INSERT INTO module_active (projection, version, previous, counter, changed_ms)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (projection) DO UPDATE SET version = excluded.version,
			previous = excluded.previous, counter = excluded.counter, changed_ms = excluded.changed_ms`,
			projection, out.Version, out.Previous, out.Counter, out.ChangedMs)
		return err
	})
	if err != nil {
		return registry.Active{}, fmt.Errorf("local: activate version %d of %s: %w", n, projection, err)
	}
	return out, nil
}

// SetShard implements registry.Store: one upsert whose update applies only from the stored
// epoch or a newer one.
func (r *Registry) SetShard(ctx context.Context, v registry.ShardVersion) error {
	err := r.s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO module_shards (projection, shard_id, epoch, version, seq, changed_ms)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (projection, shard_id) DO UPDATE SET epoch = excluded.epoch,
			version = excluded.version, seq = excluded.seq, changed_ms = excluded.changed_ms
			WHERE excluded.epoch >= module_shards.epoch`,
			v.Projection, v.ShardID, v.Epoch, v.Version, v.Seq, v.ChangedMs)
		return err
	})
	if err != nil {
		return fmt.Errorf("local: record the version of %s shard %s: %w", v.Projection, v.ShardID, err)
	}
	return nil
}

// Shards implements registry.Store.
func (r *Registry) Shards(ctx context.Context, projection string) ([]registry.ShardVersion, error) {
	rows, err := r.s.db.QueryContext(ctx, `SELECT shard_id, epoch, version, seq, changed_ms FROM module_shards
		WHERE projection = ? ORDER BY shard_id`, projection)
	if err != nil {
		return nil, fmt.Errorf("local: read the shard versions of %s: %w", projection, r.s.wrapBusy(err))
	}
	defer rows.Close()
	var out []registry.ShardVersion
	for rows.Next() {
		v := registry.ShardVersion{Projection: projection}
		if err := rows.Scan(&v.ShardID, &v.Epoch, &v.Version, &v.Seq, &v.ChangedMs); err != nil {
			return nil, fmt.Errorf("local: read the shard versions of %s: %w", projection, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("local: read the shard versions of %s: %w", projection, r.s.wrapBusy(err))
	}
	return out, nil
}
