package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/store/sqlite"
)

// Replay and Drop on the embedded store: which letters each selection moves, and the errors.
func TestReplayDrop(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const proj = "p"
	now := time.Now()
	put := func(shard, seq string, s deadletter.State) {
		t.Helper()
		l := deadletter.Letter{Projection: proj, ShardID: shard, Seq: seq, Data: []byte(`{}`), ErrorKind: "fail",
			Error: "boom", Attempts: 1, FirstFailure: now, LastFailure: now, State: s}
		if err := st.DeadLetters.Put(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1", deadletter.StateFailed)
	put("a", "2", deadletter.StateReplayRequested)
	put("a", "3", deadletter.StateReplayed)
	put("b", "1", deadletter.StateFailed)
	put("b", "2", deadletter.StateFailed)

	keys := func(ls []deadletter.Letter) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ShardID+"/"+l.Seq+"="+string(l.State))
		}
		return out
	}
	steps := []struct {
		name    string
		op      func(context.Context, deadletter.Store, string, deadletter.Selection) ([]deadletter.Letter, error)
		sel     deadletter.Selection
		want    []string
		wantErr error
	}{
		{"replay one", deadletter.Replay, deadletter.Selection{ShardID: "b", Seq: "2"}, []string{"b/2=replay_requested"}, nil},
		{"replay it again", deadletter.Replay, deadletter.Selection{ShardID: "b", Seq: "2"}, nil, deadletter.ErrNoMatch},
		{"replay a missing one", deadletter.Replay, deadletter.Selection{ShardID: "b", Seq: "9"}, nil, deadletter.ErrNoMatch},
		{"replay a shard", deadletter.Replay, deadletter.Selection{ShardID: "a"}, []string{"a/1=replay_requested"}, nil},
		{"drop a requested one", deadletter.Drop, deadletter.Selection{ShardID: "a", Seq: "2"}, []string{"a/2=dropped"}, nil},
		{"drop a replayed one", deadletter.Drop, deadletter.Selection{ShardID: "a", Seq: "3"}, nil, deadletter.ErrNoMatch},
		{"replay all", deadletter.Replay, deadletter.Selection{}, []string{"b/1=replay_requested"}, nil},
		{"drop all", deadletter.Drop, deadletter.Selection{}, []string{"a/1=dropped", "b/1=dropped", "b/2=dropped"}, nil},
		{"seq without shard", deadletter.Drop, deadletter.Selection{Seq: "1"}, nil, deadletter.ErrInvalid},
		{"bad seq", deadletter.Replay, deadletter.Selection{ShardID: "a", Seq: "01"}, nil, deadletter.ErrInvalid},
	}
	for _, s := range steps {
		got, err := s.op(ctx, st.DeadLetters, proj, s.sel)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if g := keys(got); !slices.Equal(g, s.want) {
			t.Fatalf("%s moved %v, want %v", s.name, g, s.want)
		}
		for _, l := range got {
			stored, err := st.DeadLetters.Get(ctx, proj, l.ShardID, l.Seq)
			if err != nil || stored.State != l.State {
				t.Fatalf("%s: stored %s/%s is %q (%v), returned %q", s.name, l.ShardID, l.Seq, stored.State, err, l.State)
			}
		}
	}
}
