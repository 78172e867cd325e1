package deadletter

import (
	"errors"
	"testing"
)

func TestLetterValidate(t *testing.T) {
	ok := Letter{Projection: "p", ShardID: "s", Seq: "1", State: StateFailed}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate of a minimal letter: %v", err)
	}
	for name, mutate := range map[string]func(*Letter){
		"projection":   func(l *Letter) { l.Projection = "" },
		"shard":        func(l *Letter) { l.ShardID = "" },
		"seq":          func(l *Letter) { l.Seq = "01" },
		"state":        func(l *Letter) { l.State = "" },
		"replayed seq": func(l *Letter) { l.ReplayedSeq = "a" },
		"attempts":     func(l *Letter) { l.Attempts = -2 },
	} {
		l := ok
		mutate(&l)
		if err := l.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate with a bad %s: %v, want ErrInvalid", name, err)
		}
	}
	if err := (Filter{State: "x"}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Filter with an unknown state: %v, want ErrInvalid", err)
	}
	if err := (Filter{ShardID: "s", State: StateDropped}).Validate(); err != nil {
		t.Errorf("Filter: %v", err)
	}
}

func TestValidateTransition(t *testing.T) {
	for _, tt := range []struct {
		name string
		seq  string
		from []State
		to   State
		rs   string
		ok   bool
	}{
		{"request", "1", []State{StateFailed}, StateReplayRequested, "", true},
		{"replayed", "1", []State{StateReplayRequested}, StateReplayed, "9", true},
		{"drop", "1", []State{StateFailed, StateReplayRequested}, StateDropped, "ignored", true},
		{"no from", "1", nil, StateDropped, "", false},
		{"bad from", "1", []State{"x"}, StateDropped, "", false},
		{"bad to", "1", []State{StateFailed}, "", "", false},
		{"replayed without seq", "1", []State{StateReplayRequested}, StateReplayed, "", false},
		{"bad key", "", []State{StateFailed}, StateDropped, "", false},
	} {
		err := ValidateTransition("p", "s", tt.seq, tt.from, tt.to, tt.rs)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: ValidateTransition = %v, want ok=%v (else ErrInvalid)", tt.name, err, tt.ok)
		}
	}
	// The caller's from slice is not written to, even with spare capacity.
	from := make([]State, 1, 4)
	from[0] = StateFailed
	_ = ValidateTransition("p", "s", "1", from, StateDropped, "")
	if spare := from[:2]; spare[1] != "" {
		t.Fatalf("ValidateTransition wrote %q past the caller's from slice", spare[1])
	}
}
