package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The states Replay and Drop move letters from.
var (
	// ReplayFrom: only failed letters are replayed (a replay_requested one is on its way).
	ReplayFrom = []State{StateFailed}
	// DropFrom: failed letters and letters whose replay is requested but not yet applied.
	DropFrom = []State{StateFailed, StateReplayRequested}
)

// ErrNoMatch is returned by Replay and Drop for a Selection naming one letter (Seq set) when
// no letter of that identity is in a state they move from: it is missing, or it was replayed,
// dropped or superseded already (List or Get tell which).
var ErrNoMatch = errors.New("deadletter: no dead letter in a state this moves from")

// Selection picks the letters Replay and Drop move: every letter of the projection (zero
// Selection), every letter of one shard (ShardID), or one letter (ShardID and Seq).
type Selection struct {
	ShardID string
	Seq     string
}

// Validate returns an error wrapping ErrInvalid when Seq is set without ShardID, or is not a
// sequence number (ValidateKey).
func (s Selection) Validate(projection string) error {
	if s.Seq == "" {
		return nil
	}
	if s.ShardID == "" {
		return fmt.Errorf("%w: a sequence number (%s) needs its shard", ErrInvalid, s.Seq)
	}
	return ValidateKey(projection, s.ShardID, s.Seq)
}

// Replay asks the shards' owners to re-handle the selected failed letters (failed ->
// replay_requested; each owner applies them with the handler it runs, exactly once, and a
// worker started later does the same). It returns the letters it moved, in List's order, with
// their new state. Letters that change state between List and Transition (a concurrent replay
// or drop) are skipped. Errors: ErrInvalid (a bad Selection), ErrNoMatch (one letter named and
// not failed), store errors (wrapped; the letters before the failing one stay moved).
// Safe for concurrent use as the Store is.
func Replay(ctx context.Context, s Store, projection string, sel Selection) ([]Letter, error) {
	return move(ctx, s, projection, sel, ReplayFrom, StateReplayRequested)
}

// Drop gives the selected open letters up (failed or replay_requested -> dropped: final; they
// stay listed). It returns the letters it moved; the rest is as for Replay.
func Drop(ctx context.Context, s Store, projection string, sel Selection) ([]Letter, error) {
	return move(ctx, s, projection, sel, DropFrom, StateDropped)
}

func move(ctx context.Context, s Store, projection string, sel Selection, from []State, to State) ([]Letter, error) {
	if err := sel.Validate(projection); err != nil {
		return nil, err
	}
	ls, err := s.List(ctx, projection, Filter{ShardID: sel.ShardID})
	if err != nil {
		return nil, fmt.Errorf("deadletter: listing the dead letters of %s: %w", projection, err)
	}
	var moved []Letter
	for _, l := range ls {
		if sel.Seq != "" && l.Seq != sel.Seq || !slices.Contains(from, l.State) {
			continue
		}
		err := s.Transition(ctx, projection, l.ShardID, l.Seq, from, to, "")
		if errors.Is(err, ErrState) || errors.Is(err, ErrNotFound) {
			continue // changed since it was listed (a concurrent replay or drop)
		}
		if err != nil {
			return moved, fmt.Errorf("deadletter: dead letter %s seq %s: %w", l.ShardID, l.Seq, err)
		}
		l.State = to
		moved = append(moved, l)
	}
	if sel.Seq != "" && len(moved) == 0 {
		return nil, fmt.Errorf("%w: no dead letter of %s shard %s seq %s in state %s (list them to see its state)",
			ErrNoMatch, projection, sel.ShardID, sel.Seq, statesText(from))
	}
	return moved, nil
}

func statesText(ss []State) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, " or ")
}
