// Package deadletter stores the events a projection's handler could not process under the
// dead-letter error policy (projhost run --on-error dead-letter): the full event, the error,
// and the letter's state, so an operator can inspect, replay (after fixing the handler) or
// drop it. Every store backend implements Store (the embedded SQLite store, DynamoDB) and must
// pass deadletter/deadlettertest.
//
// A letter is identified by (Projection, ShardID, Seq). Its life:
//
//	failed ──replay──▶ replay_requested ──applied by the shard's owner──▶ replayed
//	   ▲                     │
//	   └──replay failed again┘          failed | replay_requested ──drop──▶ dropped
//
// Replays are applied by the shard's current lease owner, committed with its next write
// (projection/RATIONALE.md), so a replayed event gets the same exactly-once effect as any other.
package deadletter

import (
	"context"
	"errors"
	"time"
)

// State is a letter's state.
type State string

// The states of a letter.
const (
	// StateFailed: stored after the handler failed on the event; the shard went on past it.
	StateFailed State = "failed"
	// StateReplayRequested: an operator asked for a replay; the shard's owner will re-handle the
	// event with the handler it runs and apply the result.
	StateReplayRequested State = "replay_requested"
	// StateReplayed: the replay's mutations were committed. Final.
	StateReplayed State = "replayed"
	// StateDropped: an operator gave the event up. Final.
	StateDropped State = "dropped"
	// StateSuperseded: the letter's event was still after the shard's cursor when a new owner
	// opened the shard (the previous one stopped between storing the letter and committing past
	// the event), so the event is handled again, and dead-lettered anew if it still fails.
	// Final; replaying it would apply the event twice.
	StateSuperseded State = "superseded"
)

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case StateFailed, StateReplayRequested, StateReplayed, StateDropped, StateSuperseded:
		return true
	}
	return false
}

// Letter is one dead-lettered event.
type Letter struct {
	Projection   string
	ShardID      string
	Seq          string // the event's sequence number (decimal)
	PartitionKey string
	ArrivalMs    int64  // the event's approximate arrival time, ms since the Unix epoch (0 unknown)
	Data         []byte // the event's full data, as the source delivered it

	ErrorKind string // what failed: "fail" (projhost.fail), "trap", "exit", "deadline", "bad_output"
	Error     string // the handler error's message
	Attempts  int    // handler calls that failed on this event, replays included

	FirstFailure time.Time // first failure (stored with millisecond precision)
	LastFailure  time.Time // latest failure
	State        State
	// ReplayedSeq is the shard's cursor when the replay was committed ("" until replayed).
	ReplayedSeq string
}

// Filter selects letters in List. Zero fields match everything.
type Filter struct {
	ShardID string
	State   State
}

// ErrNotFound is returned by Get and Transition when no letter has that identity.
var ErrNotFound = errors.New("deadletter: no such dead letter")

// ErrState is returned by Transition when the letter is not in one of the allowed states (it
// was replayed, dropped or re-requested by someone else first).
var ErrState = errors.New("deadletter: the dead letter is not in a state that allows this")

// ErrInvalid is returned for a letter the store cannot hold: empty projection, shard or sequence
// number, an unknown state.
var ErrInvalid = errors.New("deadletter: invalid dead letter")

// Store persists dead letters. Implementations are safe for concurrent use.
type Store interface {
	// Put creates the letter or replaces the stored one with the same identity. When one
	// exists, the stored FirstFailure is kept if it is earlier. Put is idempotent: the shard's
	// owner calls it again when it re-processes an event after a crash.
	Put(ctx context.Context, l Letter) error
	// Get returns one letter. ErrNotFound when missing.
	Get(ctx context.Context, projection, shardID, seq string) (Letter, error)
	// List returns the projection's letters matching f, ordered by shard id then sequence
	// number (numerically).
	List(ctx context.Context, projection string, f Filter) ([]Letter, error)
	// Transition sets the letter's state to to if its current state is one of from, and
	// ReplayedSeq to replayedSeq when to is StateReplayed (otherwise it is left alone). It is
	// atomic (a conditional write). ErrNotFound when missing, ErrState when in another state.
	// A Transition to the state the letter already has, when that state is in from, is allowed.
	Transition(ctx context.Context, projection, shardID, seq string, from []State, to State, replayedSeq string) error
}
