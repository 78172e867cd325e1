package deadletter

import (
	"fmt"
	"slices"

	"github.com/projhost/projhost/event"
)

// ValidSeq reports whether seq can identify a letter: a decimal number without leading zeros
// ("0" itself is allowed) of at most event.SeqWidth digits, the Kinesis pattern
// 0|([1-9]\d{0,128}). So every sequence number has one spelling, which event.PadSeq turns into
// a fixed-width string that orders numerically.
func ValidSeq(seq string) bool {
	if seq == "" || len(seq) > event.SeqWidth || (seq[0] == '0' && len(seq) > 1) {
		return false
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return false
		}
	}
	return true
}

// ValidateKey returns an error wrapping ErrInvalid unless projection and shardID are not empty
// and seq is ValidSeq.
func ValidateKey(projection, shardID, seq string) error {
	switch {
	case projection == "" || shardID == "":
		return fmt.Errorf("%w: empty projection or shard id (%q, %q)", ErrInvalid, projection, shardID)
	case !ValidSeq(seq):
		return fmt.Errorf("%w: sequence number %q of %s/%s is not a decimal number of 1 to %d digits without leading zeros",
			ErrInvalid, seq, projection, shardID, event.SeqWidth)
	}
	return nil
}

// Validate returns an error wrapping ErrInvalid when a Store cannot hold l: ValidateKey fails,
// State is not Valid, ReplayedSeq is neither "" nor ValidSeq, or Attempts is negative.
func (l Letter) Validate() error {
	if err := ValidateKey(l.Projection, l.ShardID, l.Seq); err != nil {
		return err
	}
	switch {
	case !l.State.Valid():
		return fmt.Errorf("%w: letter %s/%s/%s has unknown state %q", ErrInvalid, l.Projection, l.ShardID, l.Seq, l.State)
	case l.ReplayedSeq != "" && !ValidSeq(l.ReplayedSeq):
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
// StateReplayed and replayedSeq is not ValidSeq.
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
	if to == StateReplayed && !ValidSeq(replayedSeq) {
		return fmt.Errorf("%w: transition of %s/%s/%s to %s needs the replayed sequence number, got %q",
			ErrInvalid, projection, shardID, seq, to, replayedSeq)
	}
	return nil
}
