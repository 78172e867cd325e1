// Package store names what a storage backend gives a projection: its lease, cursor, read-model
// and dead-letter stores, and the delivery mode those stores make possible. Each backend has a
// package with an Open that returns a *Stores (store/sqlite: the embedded SQLite store;
// store/dynamo: DynamoDB). The per-shard core (projection/) and the container runner require
// the declared mode instead of discovering capabilities by type assertion, so a decorator that
// wraps a store cannot silently lose exactly-once.
package store

import (
	"errors"
	"fmt"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
)

// Mode is how a backend makes a shard's read-model writes and cursor saves exactly-once.
type Mode int

const (
	// Transactional: Committer commits a Write's mutations and the shard's cursor in one
	// transaction (the embedded SQLite store).
	Transactional Mode = iota + 1
	// Fenced: no transactions; Apply writes items conditionally on per-item, per-shard sequence
	// markers, WriteClaimer fences older owners out and reports the high-water mark of an
	// interrupted Apply, and the cursor is saved after Apply (DynamoDB;
	// store/dynamo/RATIONALE.md).
	Fenced
)

func (m Mode) String() string {
	switch m {
	case Transactional:
		return "transactional"
	case Fenced:
		return "fenced"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Stores is what a backend's Open returns. Every field but Close is required; Committer is
// required in Transactional mode and WriteClaimer in Fenced mode (Validate checks it).
type Stores struct {
	Leases      shardmap.LeaseStore
	Cursors     cursorstore.Store
	ReadModel   readmodel.Store
	DeadLetters deadletter.Store
	// Registry holds the projections' module versions and active pointers (registry.Store).
	// Optional: nil where a backend has none (a test's in-memory stores); deploying needs it.
	Registry registry.Store

	Mode Mode
	// Committer commits mutations and cursor together (Transactional mode). Its cursors are
	// the ones Cursors reads.
	Committer readmodel.Committer
	// WriteClaimer fences a shard's read-model writes for a new owner (Fenced mode).
	WriteClaimer readmodel.WriteClaimer
	// Resetter rewinds a shard's writes and clears a projection's documents for the management
	// verbs (manage.Reset, manage.Rebuild). Optional: nil where a backend has none (they then
	// refuse with manage.ErrUnsupported).
	Resetter readmodel.Resetter

	// CheckMutation, when set, reports a mutation the read model cannot store (a DynamoDB item
	// limit, say) before it is committed, so that the core charges it to the event that
	// produced it (the error policy applies) instead of retrying a commit that can never
	// succeed. nil: every mutation a handler may return (ABI.md §4) can be stored.
	CheckMutation func(projection string, m event.Mutation) error

	// Close releases the backend's resources (nil: nothing to release).
	Close func() error
}

// ErrIncomplete is wrapped by Validate's errors.
var ErrIncomplete = errors.New("store: incomplete stores")

// Validate reports a missing store or a mode without the capability it needs.
func (s *Stores) Validate() error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: no stores", ErrIncomplete)
	case s.Leases == nil || s.Cursors == nil || s.ReadModel == nil || s.DeadLetters == nil:
		return fmt.Errorf("%w: lease, cursor, read-model and dead-letter stores are all required", ErrIncomplete)
	case s.Mode == Transactional && s.Committer == nil:
		return fmt.Errorf("%w: transactional mode needs a Committer", ErrIncomplete)
	case s.Mode == Fenced && s.WriteClaimer == nil:
		return fmt.Errorf("%w: fenced mode needs a WriteClaimer", ErrIncomplete)
	case s.Mode != Transactional && s.Mode != Fenced:
		return fmt.Errorf("%w: unknown delivery mode %v", ErrIncomplete, s.Mode)
	}
	return nil
}
