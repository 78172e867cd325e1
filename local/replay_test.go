package local

import (
	"context"
	"errors"
	"testing"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/readmodel"
)

// TestReplayMarksLetter: a replay write moves its letter to replayed (ReplayedSeq = the write's
// Seq) with the mutations, through Apply and through Commit; a refused one leaves the letter and
// documents as they were.
func TestReplayMarksLetter(t *testing.T) {
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		s := openTest(t)
		rm, dl := s.ReadModels(), s.DeadLetters()
		write := rm.Apply
		if commit {
			write = rm.Commit
		}
		doc := func(v string) []readmodel.Mutation {
			return []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"v":"` + v + `"}`)}}
		}
		if _, err := s.Cursors().Claim(ctx, "p", "s", 2); err != nil {
			t.Fatal(err)
		}
		if err := rm.Commit(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: "30", Mutations: doc("30")}); err != nil {
			t.Fatal(err)
		}
		requestReplay(t, s, "p", "s", "12")
		expectDoc := func(v string) {
			t.Helper()
			got, _, err := rm.Get(ctx, "p", "c", "k")
			if err != nil || string(got) != `{"v":"`+v+`"}` {
				t.Fatalf("commit=%v: document %s, %v; want v %s", commit, got, err, v)
			}
		}
		expectLetter := func(state deadletter.State, replayedSeq string) {
			t.Helper()
			l, err := dl.Get(ctx, "p", "s", "12")
			if err != nil || l.State != state || l.ReplayedSeq != replayedSeq {
				t.Fatalf("commit=%v: letter %s %q, %v; want %s %q", commit, l.State, l.ReplayedSeq, err, state, replayedSeq)
			}
		}
		for _, tt := range []struct {
			name string
			w    readmodel.Write
			want error
		}{
			{"stale epoch", readmodel.Write{Epoch: 1, Seq: "30", Replay: "12"}, readmodel.ErrFenced},
			{"no such letter", readmodel.Write{Epoch: 2, Seq: "30", Replay: "13"}, deadletter.ErrNotFound},
			{"replay above the write", readmodel.Write{Epoch: 2, Seq: "30", Replay: "31"}, ErrInvalid},
			{"replay not canonical", readmodel.Write{Epoch: 2, Seq: "30", Replay: "012"}, ErrInvalid},
		} {
			w := tt.w
			w.Projection, w.ShardID, w.Mutations = "p", "s", doc("refused")
			if err := write(ctx, w); !errors.Is(err, tt.want) {
				t.Fatalf("commit=%v: %s: err = %v, want %v", commit, tt.name, err, tt.want)
			}
			expectDoc("30")
			expectLetter(deadletter.StateReplayRequested, "")
		}
		if commit {
			for _, tt := range []struct {
				seq  string
				want error
			}{{"29", cursorstore.ErrBackwards}, {"31", ErrInvalid}} {
				err := rm.Commit(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: tt.seq, Replay: "12", Mutations: doc("refused")})
				if !errors.Is(err, tt.want) {
					t.Fatalf("replay Commit at seq %s (cursor 30): err = %v, want %v", tt.seq, err, tt.want)
				}
				expectLetter(deadletter.StateReplayRequested, "")
			}
		}
		if err := write(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: "30", Replay: "12", Mutations: doc("replayed")}); err != nil {
			t.Fatal(err)
		}
		expectDoc("replayed")
		expectLetter(deadletter.StateReplayed, "30")
		// Repeated later, when the shard has moved on: nothing happens.
		if err := rm.Commit(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: "40", Mutations: doc("40")}); err != nil {
			t.Fatal(err)
		}
		if err := write(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: "30", Replay: "12", Mutations: doc("again")}); err != nil {
			t.Fatalf("commit=%v: repeated replay: %v", commit, err)
		}
		expectDoc("40")
		expectLetter(deadletter.StateReplayed, "30")
		// A dropped letter is not replayed.
		requestReplay(t, s, "p", "s", "14")
		if err := dl.Transition(ctx, "p", "s", "14", []deadletter.State{deadletter.StateReplayRequested}, deadletter.StateDropped, ""); err != nil {
			t.Fatal(err)
		}
		err := write(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 2, Seq: "40", Replay: "14", Mutations: doc("dropped")})
		if !errors.Is(err, deadletter.ErrState) {
			t.Fatalf("commit=%v: replay of a dropped letter: err = %v, want ErrState", commit, err)
		}
		expectDoc("40")
		if c, err := s.Cursors().Get(ctx, "p", "s"); err != nil || c.Seq != "40" || c.Epoch != 2 {
			t.Fatalf("cursor %+v, %v; want 40 at epoch 2", c, err)
		}
	}
}
