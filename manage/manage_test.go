package manage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/manage"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const shard = "0"

// owner is a shard's owner at one epoch, writing as the per-shard core does.
type owner struct {
	st    *store.Stores
	proj  string
	epoch int64
}

// open claims the shard at o.epoch; it returns the cursor and the read model's high-water mark.
func (o owner) open(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	c, err := o.st.Cursors.Claim(ctx, o.proj, shard, o.epoch)
	if err != nil {
		t.Fatalf("claim at epoch %d: %v", o.epoch, err)
	}
	hw := ""
	if o.st.Mode == store.Fenced {
		if hw, err = o.st.WriteClaimer.ClaimWrites(ctx, o.proj, shard, o.epoch); err != nil {
			t.Fatalf("claim writes at epoch %d: %v", o.epoch, err)
		}
	}
	return c.Seq, hw
}

// commit writes doc n = value for key k as the effect of the events up to seq, with the cursor.
func (o owner) commit(seq string, value int) error {
	ctx := context.Background()
	w := readmodel.Write{Projection: o.proj, ShardID: shard, Epoch: o.epoch, Seq: seq,
		Mutations: []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(fmt.Sprintf(`{"n":%d}`, value))}}}
	if o.st.Mode == store.Transactional {
		return o.st.Committer.Commit(ctx, w)
	}
	if err := o.st.ReadModel.Apply(ctx, w); err != nil {
		return err
	}
	return o.st.Cursors.Save(ctx, o.proj, shard, o.epoch, seq)
}

func doc(t *testing.T, st *store.Stores, proj string) string {
	t.Helper()
	d, ok, err := st.ReadModel.Get(context.Background(), proj, "c", "k")
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "<none>"
	}
	return string(d)
}

// setup creates the shard's lease held by worker w1 at epoch 1, and commits seq 1..10 (doc
// n = seq).
func setup(t *testing.T, st *store.Stores, proj string) owner {
	t.Helper()
	ctx := context.Background()
	if err := st.Leases.Create(ctx, shardmap.Lease{Projection: proj, ShardID: shard, Owner: "w1", Counter: 1, Epoch: 1, State: shardmap.StateActive}); err != nil {
		t.Fatal(err)
	}
	o := owner{st: st, proj: proj, epoch: 1}
	o.open(t)
	for i := 1; i <= 10; i++ {
		if err := o.commit(fmt.Sprint(i), i); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if got := doc(t, st, proj); got != `{"n":10}` {
		t.Fatalf("doc after setup = %s", got)
	}
	return o
}

func isFenced(err error) bool {
	return errors.Is(err, readmodel.ErrFenced) || errors.Is(err, cursorstore.ErrFenced)
}

// TestResetReplaysAgain: after a reset backwards, the events after the new cursor are applied
// again (the stores' exactly-once markers must not skip them as applied), the old owner's
// writes are fenced, and the lease is freed at the reset's epoch. Without ResetWrites the
// write of seq 5 below is skipped by both stores (the embedded store's applied seq, DynamoDB's
// item marker at 10) and the document stays {"n":10}.
func TestResetReplaysAgain(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			proj := "reset-" + b.Name
			old := setup(t, st, proj)
			rs, err := manage.Reset(ctx, st, nil, proj, shard, manage.Target{Kind: manage.ToSeq, Seq: "4"}, manage.Options{Settle: -1})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Seq != "4" || rs[0].Epoch != 2 {
				t.Fatalf("Reset = %+v, want shard %s at 4, epoch 2", rs, shard)
			}
			ls, err := st.Leases.List(ctx, proj)
			if err != nil || len(ls) != 1 || ls[0].Owner != "" || ls[0].Epoch != 2 {
				t.Fatalf("lease after Reset = %+v, %v; want free at epoch 2", ls, err)
			}
			if p, err := st.Cursors.Pauses(ctx, proj); err != nil || p.Any() {
				t.Fatalf("pauses after Reset = %+v, %v; want the reset's own pause lifted", p, err)
			}
			// The old owner's next commit is refused.
			if err := old.commit("11", 11); !isFenced(err) {
				t.Fatalf("commit by the epoch before the reset = %v, want fenced", err)
			}
			// The next owner (its take raises the epoch) starts after 4, with no interrupted
			// write to replay up to, and its writes are applied.
			next := owner{st: st, proj: proj, epoch: 3}
			cur, hw := next.open(t)
			if cur != "4" || hw != "" {
				t.Fatalf("next owner opens at cursor %q, high-water %q; want 4 and none", cur, hw)
			}
			for i := 5; i <= 7; i++ {
				if err := next.commit(fmt.Sprint(i), 100+i); err != nil {
					t.Fatalf("commit %d after the reset: %v", i, err)
				}
				if got, want := doc(t, st, proj), fmt.Sprintf(`{"n":%d}`, 100+i); got != want {
					t.Fatalf("doc after the replayed seq %d = %s, want %s (skipped as already applied?)", i, got, want)
				}
			}
			// A replay of the same batch still changes nothing (exactly-once within the new
			// generation).
			if err := next.commit("6", 999); err != nil && !errors.Is(err, cursorstore.ErrBackwards) {
				t.Fatal(err)
			}
			if got := doc(t, st, proj); got != `{"n":107}` {
				t.Fatalf("doc after a replayed batch = %s, want {\"n\":107}", got)
			}
			// A second reset backwards works the same.
			if _, err := manage.Reset(ctx, st, nil, proj, shard, manage.Target{Kind: manage.ToTrimHorizon}, manage.Options{Settle: -1}); err != nil {
				t.Fatal(err)
			}
			third := owner{st: st, proj: proj, epoch: 5}
			if cur, hw := third.open(t); cur != "" || hw != "" {
				t.Fatalf("after reset to trim-horizon: cursor %q, high-water %q", cur, hw)
			}
			if err := third.commit("1", 201); err != nil {
				t.Fatal(err)
			}
			if got := doc(t, st, proj); got != `{"n":201}` {
				t.Fatalf("doc after the second reset = %s", got)
			}
		})
	}
}

func TestResetKeepsAnEarlierPause(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			proj := "keep-" + b.Name
			setup(t, st, proj)
			if err := manage.Pause(ctx, st, proj, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := manage.Reset(ctx, st, nil, proj, "", manage.Target{Kind: manage.ToSeq, Seq: "3"}, manage.Options{Settle: -1}); err != nil {
				t.Fatal(err)
			}
			if p, err := st.Cursors.Pauses(ctx, proj); err != nil || !p.All {
				t.Fatalf("pauses after Reset = %+v, %v; want the projection still paused", p, err)
			}
			r, err := manage.Resume(ctx, st, proj, "")
			if err != nil || len(r.Unpaused) != 1 || r.Unpaused[0] != "" {
				t.Fatalf("Resume = %+v, %v", r, err)
			}
			if p, err := st.Cursors.Pauses(ctx, proj); err != nil || p.Any() {
				t.Fatalf("pauses after Resume = %+v, %v", p, err)
			}
		})
	}
}

func TestResetErrors(t *testing.T) {
	st := storetest.Backends()[0].Open(t)
	ctx := context.Background()
	proj := "errors"
	cases := []struct {
		name  string
		shard string
		to    manage.Target
		want  error
	}{
		{"no lease", "9", manage.Target{Kind: manage.ToSeq, Seq: "1"}, manage.ErrNoShard},
		{"no shards", "", manage.Target{Kind: manage.ToSeq, Seq: "1"}, manage.ErrNoShard},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := manage.Reset(ctx, st, nil, proj, c.shard, c.to, manage.Options{Settle: -1}); !errors.Is(err, c.want) {
				t.Fatalf("Reset = %v, want %v", err, c.want)
			}
		})
	}
	setup(t, st, proj)
	if _, err := manage.Reset(ctx, st, nil, proj, shard, manage.Target{Kind: manage.ToLatest}, manage.Options{Settle: -1}); !errors.Is(err, manage.ErrTarget) {
		t.Fatalf("Reset to latest without a source = %v, want ErrTarget", err)
	}
	nl := *st
	nl.Resetter = nil
	if _, err := manage.Reset(ctx, &nl, nil, proj, shard, manage.Target{Kind: manage.ToSeq, Seq: "1"}, manage.Options{Settle: -1}); !errors.Is(err, manage.ErrUnsupported) {
		t.Fatalf("Reset without a Resetter = %v, want ErrUnsupported", err)
	}
}

func TestParseTarget(t *testing.T) {
	ts := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want manage.Target
		err  bool
	}{
		{"17", manage.Target{Kind: manage.ToSeq, Seq: "17"}, false},
		{"49590338271490256608559692538361571095921575989136588898", manage.Target{Kind: manage.ToSeq, Seq: "49590338271490256608559692538361571095921575989136588898"}, false},
		{"trim-horizon", manage.Target{Kind: manage.ToTrimHorizon}, false},
		{"TRIM_HORIZON", manage.Target{Kind: manage.ToTrimHorizon}, false},
		{"latest", manage.Target{Kind: manage.ToLatest}, false},
		{"LATEST", manage.Target{Kind: manage.ToLatest}, false},
		{"2026-01-02T15:04:05Z", manage.Target{Kind: manage.ToTime, Time: ts}, false},
		{"007", manage.Target{}, true},
		{"-1", manage.Target{}, true},
		{"", manage.Target{}, true},
		{"yesterday", manage.Target{}, true},
	}
	for _, c := range cases {
		got, err := manage.ParseTarget(c.in)
		if c.err {
			if !errors.Is(err, manage.ErrTarget) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want ErrTarget", c.in, got, err)
			}
			continue
		}
		if err != nil || got.Kind != c.want.Kind || got.Seq != c.want.Seq || !got.Time.Equal(c.want.Time) {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestRebuildClears: documents deleted, cursors at the start, finished leases active again,
// every older epoch fenced.
func TestRebuildClears(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			proj := "rebuild-" + b.Name
			old := setup(t, st, proj)
			if err := st.Leases.Create(ctx, shardmap.Lease{Projection: proj, ShardID: "1", Counter: 4, Epoch: 3, State: shardmap.StateFinished}); err != nil {
				t.Fatal(err)
			}
			if err := manage.Rebuild(ctx, st, proj, manage.Options{Settle: -1}); err != nil {
				t.Fatal(err)
			}
			if got := doc(t, st, proj); got != "<none>" {
				t.Fatalf("doc after Rebuild = %s, want none", got)
			}
			docs, err := st.ReadModel.Scan(ctx, proj, "")
			if err != nil || len(docs) != 0 {
				t.Fatalf("Scan after Rebuild = %v, %v", docs, err)
			}
			ls, err := st.Leases.List(ctx, proj)
			if err != nil || len(ls) != 2 {
				t.Fatal(ls, err)
			}
			for _, l := range ls {
				c, err := st.Cursors.Get(ctx, proj, l.ShardID)
				if err != nil || c.Seq != "" || c.Epoch != l.Epoch || l.State != shardmap.StateActive || l.Owner != "" {
					t.Fatalf("shard %s after Rebuild: lease %+v, cursor %+v, %v", l.ShardID, l, c, err)
				}
			}
			if err := old.commit("11", 11); !isFenced(err) {
				t.Fatalf("commit by the epoch before the rebuild = %v, want fenced", err)
			}
			next := owner{st: st, proj: proj, epoch: 3}
			next.open(t)
			if err := next.commit("1", 1); err != nil {
				t.Fatal(err)
			}
			if got := doc(t, st, proj); got != `{"n":1}` {
				t.Fatalf("doc after the rebuild's first batch = %s", got)
			}
		})
	}
}

// headSource is a source.Source and source.Header whose Head calls head (the rest is unused).
type headSource struct {
	source.Source
	head func() string
}

func (h headSource) Head(context.Context, string) (string, error) { return h.head(), nil }

// TestResetLatestAfterTheFence: reset --to latest reads the head once the shard's writes are
// fenced. Here the head is 10 when the reset starts, and the owner commits 11 and 12 before it
// notices the pause: the cursor is set to 12, not moved back to 10 (which would have the next
// owner apply 11 and 12 a second time).
func TestResetLatestAfterTheFence(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			proj := "latest-" + b.Name
			old := setup(t, st, proj)
			head, calls := "10", 0
			src := headSource{head: func() string {
				calls++
				if calls == 1 { // the owner, not paused yet, handles two more events
					for i := 11; i <= 12; i++ {
						if err := old.commit(fmt.Sprint(i), i); err != nil {
							t.Errorf("commit %d: %v", i, err)
						}
					}
					defer func() { head = "12" }()
				}
				return head
			}}
			rs, err := manage.Reset(ctx, st, src, proj, shard, manage.Target{Kind: manage.ToLatest}, manage.Options{Settle: -1})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Seq != "12" {
				t.Fatalf("Reset = %+v, want the cursor at 12, the head once fenced", rs)
			}
			c, err := st.Cursors.Get(ctx, proj, shard)
			if err != nil || c.Seq != "12" {
				t.Fatalf("cursor after Reset = %+v, %v; want 12", c, err)
			}
			if err := old.commit("13", 13); !isFenced(err) {
				t.Fatalf("commit by the owner before the reset = %v, want fenced", err)
			}

			// A sequence number past the head is refused, and changes nothing.
			if _, err := manage.Reset(ctx, st, src, proj, shard, manage.Target{Kind: manage.ToSeq, Seq: "13"}, manage.Options{Settle: -1}); !errors.Is(err, manage.ErrTarget) {
				t.Fatalf("Reset to 13 past the head 12 = %v, want ErrTarget", err)
			}
			if c, err := st.Cursors.Get(ctx, proj, shard); err != nil || c.Seq != "12" {
				t.Fatalf("cursor after a refused Reset = %+v, %v; want 12", c, err)
			}
			if p, err := st.Cursors.Pauses(ctx, proj); err != nil || p.Any() {
				t.Fatalf("pauses after a refused Reset = %+v, %v; want none", p, err)
			}
		})
	}
}
