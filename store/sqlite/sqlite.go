// Package sqlite opens projhost's embedded store (package local: one SQLite file, no setup) as a
// store.Stores in Transactional mode: a commit writes the read-model mutations, the cursor and
// a replayed dead letter's state in one transaction.
package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/store"
)

// FileName is the database file's name inside the data directory (local.FileName).
const FileName = local.FileName

// ErrNoStore is returned by OpenExisting and OpenReadOnly when the directory holds no embedded
// store (local.ErrNoStore).
var ErrNoStore = local.ErrNoStore

// Open opens (creating when missing) the embedded store in dir and returns its stores; Close
// closes the database. Errors: those of local.Open (local.ErrSchema, local.ErrBusy, file
// system errors).
func Open(dir string, opts ...local.Option) (*store.Stores, error) {
	st, err := local.Open(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening the embedded store in %s: %w", dir, err)
	}
	return stores(st), nil
}

// OpenReadOnly opens the existing embedded store in dir for commands that only read
// (local.OpenReadOnly: no write lock taken, works in a read-only directory); every write
// through the stores fails. Errors: those of local.OpenReadOnly (ErrNoStore with what to do,
// local.ErrSchema, file system errors).
func OpenReadOnly(dir string, opts ...local.Option) (*store.Stores, error) {
	st, err := local.OpenReadOnly(dir, opts...)
	if err != nil {
		if errors.Is(err, ErrNoStore) {
			return nil, err
		}
		return nil, fmt.Errorf("opening the embedded store in %s to read: %w", dir, err)
	}
	return stores(st), nil
}

func stores(st *local.Store) *store.Stores {
	rm := st.ReadModels()
	return &store.Stores{
		Leases: st.Leases(), Cursors: st.Cursors(), ReadModel: rm, DeadLetters: st.DeadLetters(),
		Registry: st.Registry(), Mode: store.Transactional, Committer: rm, Resetter: rm, Close: st.Close,
	}
}

// OpenExisting is Open for commands that only read: it refuses to create a new, empty store
// where none is (ErrNoStore, with what to do).
func OpenExisting(dir string, opts ...local.Option) (*store.Stores, error) {
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		return nil, fmt.Errorf("%w in %s: run a projection there first (projhost run --data %s ...)", ErrNoStore, dir, dir)
	}
	return Open(dir, opts...)
}
