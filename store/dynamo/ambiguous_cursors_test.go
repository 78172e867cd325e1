package dynamo_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store/dynamo"
)

// The cursor store's writes are idempotent as the SDK retries them (Claim: epoch <= mine, Save:
// epoch = mine and seqp <= mine, Stop: epoch = mine, Resume: a failed condition is success), so
// a retry of an applied attempt succeeds. These tests prove it per method and fault kind, and
// that a genuine conflict met by a faulted attempt is still reported.

const ambShard = "shardId-000000000001"

func cursorKey(projection string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"projection": avS(projection), "shard": avS(ambShard)}
}

// cursorItem is a cursor item's attributes besides the keys (not stopped).
func cursorItem(epoch int64, seq string) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{"epoch": avN(epoch)}
	if seq != "" {
		it["seq"], it["seqp"] = avS(seq), avS(source.PadSeq(seq))
	}
	return it
}

// setCursor claims projection's cursor with epoch and saves seq ("": no save) through s.
func setCursor(t *testing.T, s *dynamo.CursorStore, projection string, epoch int64, seq string) {
	t.Helper()
	if _, err := s.Claim(ctxT(t), projection, ambShard, epoch); err != nil {
		t.Fatal(err)
	}
	if seq != "" {
		if err := s.Save(ctxT(t), projection, ambShard, epoch, seq); err != nil {
			t.Fatal(err)
		}
	}
}

// cursorCase is one call of a cursor store method whose first write is faulted.
type cursorCase struct {
	name string
	// The cursor before the call: claimed by epoch, seq saved, stopped with reason stop ("":
	// not stopped).
	epoch     int64
	seq, stop string
	call      func(t *testing.T, s *dynamo.CursorStore, projection string) error
	overtake  int64 // > 0: a Claim with this epoch lands between the applied attempt and its retry
	want      error // nil: success; else the error it must wrap
	wantEpoch int64 // the item afterwards: epoch, seq, stopped by Stop("handler failed") or not
	wantSeq   string
	wantStop  bool
}

func runCursorCases(t *testing.T, cases []cursorCase) {
	fe, proxied, direct := openBoth(t, dynamo.NewCursorStore)
	for i, c := range cases {
		for _, kind := range faultproxy.Kinds {
			t.Run(c.name+"/"+kind.String(), func(t *testing.T) {
				p := "cursor-" + kind.String() + "-" + string(rune('a'+i))
				before := time.Now().UnixMilli()
				setCursor(t, direct, p, c.epoch, c.seq)
				if c.stop != "" {
					if err := direct.Stop(ctxT(t), p, ambShard, c.epoch, c.stop); err != nil {
						t.Fatal(err)
					}
				}
				fe.arm(kind, fe.names.Cursors, `"`+p+`"`)
				if c.overtake > 0 {
					fe.afterFault(t, func() { setCursor(t, direct, p, c.overtake, "") })
				}
				err := c.call(t, proxied, p)
				after := time.Now().UnixMilli()
				if (c.want == nil) != (err == nil) || !errors.Is(err, c.want) {
					t.Fatalf("error = %v, want %v", err, c.want)
				}
				if c.want != nil && c.overtake == 0 {
					fe.requireFaultedConflict(t)
				} else {
					fe.requireFaulted(t)
				}
				want := cursorItem(c.wantEpoch, c.wantSeq)
				if c.wantStop {
					got, err := direct.Get(ctxT(t), p, ambShard)
					if err != nil {
						t.Fatal(err)
					}
					if got.StoppedMs < before || got.StoppedMs > after {
						t.Fatalf("stopped_ms %d outside the case [%d, %d]", got.StoppedMs, before, after)
					}
					want["stopped"], want["stopped_ms"] = avS("handler failed"), avN(got.StoppedMs)
				}
				fe.requireItem(t, fe.names.Cursors, cursorKey(p), want)
			})
		}
	}
}

// claim calls Claim with epoch and requires it to return the cursor at seq (and epoch) when it
// succeeds.
func claim(epoch int64, seq string) func(*testing.T, *dynamo.CursorStore, string) error {
	return func(t *testing.T, s *dynamo.CursorStore, p string) error {
		got, err := s.Claim(ctxT(t), p, ambShard, epoch)
		if err == nil && (got.Projection != p || got.ShardID != ambShard || got.Epoch != epoch || got.Seq != seq) {
			t.Fatalf("Claim = %+v, want epoch %d seq %s", got, epoch, seq)
		}
		return err
	}
}

func save(epoch int64, seq string) func(*testing.T, *dynamo.CursorStore, string) error {
	return func(t *testing.T, s *dynamo.CursorStore, p string) error {
		return s.Save(ctxT(t), p, ambShard, epoch, seq)
	}
}

func stop(epoch int64) func(*testing.T, *dynamo.CursorStore, string) error {
	return func(t *testing.T, s *dynamo.CursorStore, p string) error {
		return s.Stop(ctxT(t), p, ambShard, epoch, "handler failed")
	}
}

func TestAmbiguousCursorClaim(t *testing.T) {
	runCursorCases(t, []cursorCase{
		{name: "claim", epoch: 1, seq: "10", call: claim(2, "10"), wantEpoch: 2, wantSeq: "10"},
		{name: "stopped", epoch: 1, seq: "10", stop: "handler failed", call: claim(2, "10"), wantEpoch: 2, wantSeq: "10", wantStop: true},
		{name: "newer epoch stored", epoch: 3, seq: "10", call: claim(2, ""), want: cursorstore.ErrFenced, wantEpoch: 3, wantSeq: "10"},
		{name: "newer epoch after the applied attempt", epoch: 1, seq: "10", call: claim(2, ""), overtake: 3,
			want: cursorstore.ErrFenced, wantEpoch: 3, wantSeq: "10"},
	})
}

func TestAmbiguousCursorSave(t *testing.T) {
	runCursorCases(t, []cursorCase{
		{name: "save", epoch: 2, seq: "10", call: save(2, "25"), wantEpoch: 2, wantSeq: "25"},
		{name: "higher seq stored", epoch: 2, seq: "30", call: save(2, "25"), want: cursorstore.ErrBackwards, wantEpoch: 2, wantSeq: "30"},
		{name: "newer epoch stored", epoch: 3, seq: "10", call: save(2, "25"), want: cursorstore.ErrFenced, wantEpoch: 3, wantSeq: "10"},
		{name: "newer epoch after the applied attempt", epoch: 2, seq: "10", call: save(2, "25"), overtake: 3,
			want: cursorstore.ErrFenced, wantEpoch: 3, wantSeq: "25"},
	})
}

func TestAmbiguousCursorStop(t *testing.T) {
	runCursorCases(t, []cursorCase{
		{name: "stop", epoch: 2, seq: "10", call: stop(2), wantEpoch: 2, wantSeq: "10", wantStop: true},
		{name: "newer epoch stored", epoch: 3, seq: "10", call: stop(2), want: cursorstore.ErrFenced, wantEpoch: 3, wantSeq: "10"},
	})
}

func TestAmbiguousCursorResume(t *testing.T) {
	resume := func(t *testing.T, s *dynamo.CursorStore, p string) error { return s.Resume(ctxT(t), p, ambShard) }
	runCursorCases(t, []cursorCase{
		{name: "resume", epoch: 2, seq: "10", stop: "handler failed", call: resume, wantEpoch: 2, wantSeq: "10"},
	})
}
