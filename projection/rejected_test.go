package projection_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store"
)

// rejecting wraps a store's commit path (Committer or ReadModel.Apply) to refuse, as invalid,
// every write holding a document of collection/key, before anything of it is written: what a
// DynamoDB ValidationException does for a document no rule foresaw.
type rejecting struct {
	readmodel.Committer
	readmodel.Store
	collection, key string
	refusals        int
}

func (r *rejecting) refuse(w readmodel.Write) error {
	for _, m := range w.Mutations {
		if m.Collection == r.collection && m.Key == r.key {
			r.refusals++
			return &readmodel.RejectedError{Collection: m.Collection, Key: m.Key, Err: errors.New("ValidationException: item too big")}
		}
	}
	return nil
}

func (r *rejecting) Commit(ctx context.Context, w readmodel.Write) error {
	if err := r.refuse(w); err != nil {
		return err
	}
	return r.Committer.Commit(ctx, w)
}

func (r *rejecting) Apply(ctx context.Context, w readmodel.Write) error {
	if err := r.refuse(w); err != nil {
		return err
	}
	return r.Store.Apply(ctx, w)
}

// A commit the store refuses as invalid (readmodel.ErrRejected) is not retried for ever: the
// events since the last commit are handled again and the refused document is charged to the
// event whose output it was, under the error policy (dead-letter here; stop below), on both
// stores. Every ORD event is refused in turn; the read model is exactly the other flights.
func TestRejectedCommitReachesThePolicy(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:200]
	evs := events(fs)
	ord := indexesOf(fs, "ORD")
	require.GreaterOrEqual(t, len(ord), 3)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := *b.Open(t)
			rj := &rejecting{Committer: st.Committer, Store: st.ReadModel, collection: "airports", key: "ORD"}
			if st.Mode == store.Transactional {
				st.Committer = rj
			} else {
				st.ReadModel = rj
			}
			sh, rec := openFlights(t, &st, projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 1})
			ctx := context.Background()
			push(t, sh, evs, 50)
			sh.Close(ctx)
			require.Len(t, rec.dead, len(ord), "every ORD event dead-lettered, once")
			want := map[string]bool{}
			for _, i := range ord {
				want[evs[i].Seq] = true
			}
			for _, l := range rec.dead {
				require.True(t, want[l.Seq], "dead letter %s is an ORD event", l.Seq)
				delete(want, l.Seq)
				require.Equal(t, projection.KindBadOutput, l.ErrorKind)
				require.Contains(t, l.Error, "airports/ORD cannot be stored in the read model: readmodel: write refused by the store as invalid: document airports/ORD: ValidationException: item too big")
			}
			require.Equal(t, len(ord), rj.refusals, "one refused commit per ORD event, none retried")
			check(t, &st, without(fs, ord...))
		})
	}
}

// Under the stop policy a refused commit stops the shard at the event whose document it was,
// with what came before it committed.
func TestRejectedCommitStops(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:300]
	evs := events(fs)
	ord := indexesOf(fs, "ORD")
	require.NotEmpty(t, ord)
	first := ord[0]
	require.Positive(t, first)
	st := *storetest.Backends()[0].Open(t)
	st.Committer = &rejecting{Committer: st.Committer, collection: "airports", key: "ORD"}
	sh, rec := openFlights(t, &st, projection.Policy{OnError: projection.Stop, MaxAttempts: 2})
	ctx := context.Background()
	err := sh.Handle(ctx, evs)
	require.ErrorIs(t, err, projection.ErrStopped)
	require.Len(t, rec.stopped, 1)
	require.Contains(t, rec.stopped[0], "handler bad_output at seq "+evs[first].Seq)
	require.Equal(t, evs[first-1].Seq, sh.Committed())
	check(t, &st, fs[:first])
	sh.Close(ctx)
}
