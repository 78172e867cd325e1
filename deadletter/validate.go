package deadletter

import (
	"fmt"
	"slices"

	"github.com/projhost/projhost/event"
)

// ValidateKey returns an error wrapping ErrInvalid unless projection and shardID are not empty
// and seq is event.ValidSeq.
func ValidateKey(projection, shardID, seq string) error {
	switch {
	case projection == "" || shardID == "":
		return fmt.Errorf("%w: empty projection or shard id (%q, %q)", ErrInvalid, projection, shardID)
	case !event.ValidSeq(seq):
		return fmt.Errorf("%w: sequence number %q of %s/%s is not a decimal number of 1 to %d digits without leading zeros",
			ErrInvalid, seq, projection, shardID, event.SeqWidth)
	}
	return nil
}

// Validate returns an error wrapping ErrInvalid when a Store cannot hold l: ValidateKey fails,
// State is not Valid, ReplayedSeq is neither "" nor event.ValidSeq, or Attempts is negative.
func (l Letter) Validate() error {
	if err := ValidateKey(l.Projection, l.ShardID, l.Seq); err != nil {
		return err
	}
	switch {
	case !l.State.Valid():
		return fmt.Errorf("%w: letter %s/%s/%s has unknown state %q", ErrInvalid, l.Projection, l.ShardID, l.Seq, l.State)
	case l.ReplayedSeq != "" && !event.ValidSeq(l.ReplayedSeq):
		return fmt.Errorf("%w: letter %s/%s/%s has replayed sequence number %q, not a decimal number",
			ErrInvalid, l.Projection, l.ShardID, l.Seq, l.ReplayedSeq)
	case l.Attempts < 0:
		return fmt.Errorf("%w: letter %s/%s/%s has %d attempts", ErrInvalid, l.Projection, l.ShardID, l.Seq, l.Attempts)
	}
	return nil
}

// Validate returns an error wrapping ErrInvalid when f.State is neither "" nor Valid.
func (f Filter) Validate() error {
	if f.State != "" && !f.State.Valid() {
		return fmt.Errorf("%w: filter on unknown state %q", ErrInvalid, f.State)
	}
	return nil
}

// ValidateTransition returns an error wrapping ErrInvalid for a Transition no letter can make:
// ValidateKey fails, from is empty or holds a state that is not Valid, to is not Valid, or to is
// StateReplayed and replayedSeq is not event.ValidSeq.
func ValidateTransition(projection, shardID, seq string, from []State, to State, replayedSeq string) error {
	if err := ValidateKey(projection, shardID, seq); err != nil {
		return err
	}
	if len(from) == 0 {
		return fmt.Errorf("%w: transition of %s/%s/%s from no state", ErrInvalid, projection, shardID, seq)
	}
	for _, st := range slices.Concat(from, []State{to}) { // not append: from is the caller's
		if !st.Valid() {
			return fmt.Errorf("%w: transition of %s/%s/%s names unknown state %q", ErrInvalid, projection, shardID, seq, st)
		}
	}
	if to == StateReplayed && !event.ValidSeq(replayedSeq) {
		return fmt.Errorf("%w: transition of %s/%s/%s to %s needs the replayed sequence number, got %q",
			ErrInvalid, projection, shardID, seq, to, replayedSeq)
	}
	return nil
}
