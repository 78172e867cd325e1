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

// cursorFaultEnv is a faultEnv with a cursor store through the proxy and one direct.
type cursorFaultEnv struct {
	*faultEnv
	proxied, direct *dynamo.CursorStore
}

func newCursorFaultEnv(t *testing.T) *cursorFaultEnv {
	fe := newFaultEnv(t)
	return &cursorFaultEnv{faultEnv: fe, proxied: openVia(t, fe, dynamo.NewCursorStore), direct: open(t, fe.env, dynamo.NewCursorStore)}
}

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

// arm faults the next write to the cursor of projection.
func (ce *cursorFaultEnv) arm(kind faultproxy.Kind, projection string) {
	ce.faultEnv.arm(kind, ce.names.Cursors, `"`+projection+`"`)
}

// setup claims projection's cursor with epoch and saves seq directly ("": no save).
func (ce *cursorFaultEnv) setup(t *testing.T, projection string, epoch int64, seq string) {
	t.Helper()
	if _, err := ce.direct.Claim(ctxT(t), projection, ambShard, epoch); err != nil {
		t.Fatal(err)
	}
	if seq != "" {
		if err := ce.direct.Save(ctxT(t), projection, ambShard, epoch, seq); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAmbiguousCursorClaim(t *testing.T) {
	ce := newCursorFaultEnv(t)
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			p := "claim-" + kind.String()
			ce.setup(t, p, 1, "10")
			ce.arm(kind, p)
			got, err := ce.proxied.Claim(ctxT(t), p, ambShard, 2)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			ce.requireFaulted(t)
			if want := (cursorstore.Cursor{Projection: p, ShardID: ambShard, Epoch: 2, Seq: "10"}); got != want {
				t.Fatalf("Claim = %+v, want %+v", got, want)
			}
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(2, "10"))
		})
		t.Run(kind.String()+"/newer epoch stored", func(t *testing.T) {
			p := "claim-fenced-" + kind.String()
			ce.setup(t, p, 3, "10")
			ce.arm(kind, p)
			if _, err := ce.proxied.Claim(ctxT(t), p, ambShard, 2); !errors.Is(err, cursorstore.ErrFenced) {
				t.Fatalf("Claim(2) over epoch 3 = %v, want ErrFenced", err)
			}
			ce.requireFaultedConflict(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(3, "10"))
		})
		t.Run(kind.String()+"/newer epoch after the applied attempt", func(t *testing.T) {
			p := "claim-overtaken-" + kind.String()
			ce.setup(t, p, 1, "10")
			ce.arm(kind, p)
			ce.afterFault(t, func() { ce.setup(t, p, 3, "") })
			if _, err := ce.proxied.Claim(ctxT(t), p, ambShard, 2); !errors.Is(err, cursorstore.ErrFenced) {
				t.Fatalf("Claim(2) overtaken by epoch 3 = %v, want ErrFenced", err)
			}
			ce.requireFaulted(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(3, "10"))
		})
	}
}

func TestAmbiguousCursorSave(t *testing.T) {
	ce := newCursorFaultEnv(t)
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			p := "save-" + kind.String()
			ce.setup(t, p, 2, "10")
			ce.arm(kind, p)
			if err := ce.proxied.Save(ctxT(t), p, ambShard, 2, "25"); err != nil {
				t.Fatalf("Save: %v", err)
			}
			ce.requireFaulted(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(2, "25"))
		})
		t.Run(kind.String()+"/higher seq stored", func(t *testing.T) {
			p := "save-backwards-" + kind.String()
			ce.setup(t, p, 2, "30")
			ce.arm(kind, p)
			if err := ce.proxied.Save(ctxT(t), p, ambShard, 2, "25"); !errors.Is(err, cursorstore.ErrBackwards) {
				t.Fatalf("Save(25) over 30 = %v, want ErrBackwards", err)
			}
			ce.requireFaultedConflict(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(2, "30"))
		})
		t.Run(kind.String()+"/newer epoch stored", func(t *testing.T) {
			p := "save-fenced-" + kind.String()
			ce.setup(t, p, 3, "10")
			ce.arm(kind, p)
			if err := ce.proxied.Save(ctxT(t), p, ambShard, 2, "25"); !errors.Is(err, cursorstore.ErrFenced) {
				t.Fatalf("Save by epoch 2 over epoch 3 = %v, want ErrFenced", err)
			}
			ce.requireFaultedConflict(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(3, "10"))
		})
	}
}

func TestAmbiguousCursorStop(t *testing.T) {
	ce := newCursorFaultEnv(t)
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			p := "stop-" + kind.String()
			ce.setup(t, p, 2, "10")
			ce.arm(kind, p)
			before := time.Now().UnixMilli()
			if err := ce.proxied.Stop(ctxT(t), p, ambShard, 2, "handler failed"); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			after := time.Now().UnixMilli()
			ce.requireFaulted(t)
			c, err := ce.direct.Get(ctxT(t), p, ambShard)
			if err != nil {
				t.Fatal(err)
			}
			if c.StoppedMs < before || c.StoppedMs > after {
				t.Fatalf("stopped_ms %d outside the call [%d, %d]", c.StoppedMs, before, after)
			}
			want := cursorItem(2, "10")
			want["stopped"], want["stopped_ms"] = avS("handler failed"), avN(c.StoppedMs)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), want)
		})
		t.Run(kind.String()+"/newer epoch stored", func(t *testing.T) {
			p := "stop-fenced-" + kind.String()
			ce.setup(t, p, 3, "10")
			ce.arm(kind, p)
			if err := ce.proxied.Stop(ctxT(t), p, ambShard, 2, "handler failed"); !errors.Is(err, cursorstore.ErrFenced) {
				t.Fatalf("Stop by epoch 2 over epoch 3 = %v, want ErrFenced", err)
			}
			ce.requireFaultedConflict(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(3, "10"))
		})
	}
}

func TestAmbiguousCursorResume(t *testing.T) {
	ce := newCursorFaultEnv(t)
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			p := "resume-" + kind.String()
			ce.setup(t, p, 2, "10")
			if err := ce.direct.Stop(ctxT(t), p, ambShard, 2, "handler failed"); err != nil {
				t.Fatal(err)
			}
			ce.arm(kind, p)
			if err := ce.proxied.Resume(ctxT(t), p, ambShard); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			ce.requireFaulted(t)
			ce.requireItem(t, ce.names.Cursors, cursorKey(p), cursorItem(2, "10"))
		})
	}
}
