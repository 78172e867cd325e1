package dynamo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store/dynamo"
)

// The read model's fence raises and registry ADDs are idempotent as the SDK retries them; its
// item writes are not (the marker condition fails on the retry of an applied attempt), and
// are resolved by reading the item back. These tests prove each write per fault kind.

type rmFaultEnv struct {
	*faultEnv
	proxied, direct *dynamo.ReadModel
}

func newRMFaultEnv(t *testing.T) *rmFaultEnv {
	fe, proxied, direct := openBoth(t, newReadModel)
	return &rmFaultEnv{faultEnv: fe, proxied: proxied, direct: direct}
}

const ambColl = "totals"

func docKey(projection, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": avS(dynamo.DocPK(projection, ambColl)), "sk": avS(key)}
}

func fenceKey(projection string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": avS(projection + "#"), "sk": avS("fence#" + ambShard)}
}

func registryKey(projection string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": avS(projection + "#"), "sk": avS("collections")}
}

// fenceItem is the fence item of a shard whose last batch Apply was by epoch... ending at seq.
func fenceItem(epoch int64, seq string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"epoch": avN(epoch), "hi": avS(source.PadSeq(seq)), "seq": avS(seq)}
}

// docItem is a document item written last by a batch of epoch ending at seq (doc nil: a
// tombstone).
func docItem(t *testing.T, doc string, epoch int64, seq string) map[string]types.AttributeValue {
	t.Helper()
	it := map[string]types.AttributeValue{dynamo.SeqAttrPrefix + ambShard: avS(source.PadSeq(seq)), dynamo.EpochAttrPref + ambShard: avN(epoch)}
	if doc != "" {
		av, err := dynamo.DocToAttributeValue([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		it[dynamo.AttrDoc] = av
	}
	return it
}

func putDoc(key, doc string) event.Mutation { return put(ambColl, key, doc) }

func delDoc(key string) event.Mutation { return event.Mutation{Collection: ambColl, Key: key} }

func newReadModel(api dynamotables.ItemAPI, prefix string) (*dynamo.ReadModel, error) {
	return dynamo.NewReadModel(api, prefix)
}

func write(projection string, epoch int64, seq string, ms ...event.Mutation) readmodel.Write {
	return readmodel.Write{Projection: projection, ShardID: ambShard, Epoch: epoch, Seq: seq, Mutations: ms}
}

func (re *rmFaultEnv) applyDirect(t *testing.T, w readmodel.Write) {
	t.Helper()
	if err := re.direct.Apply(ctxT(t), w); err != nil {
		t.Fatal(err)
	}
}

// setItem writes attrs onto the document item at key directly: another writer's effect.
func (re *rmFaultEnv) setItem(t *testing.T, projection, key string, epoch int64, seq string) {
	t.Helper()
	_, err := re.client.UpdateItem(ctxT(t), &dynamodb.UpdateItemInput{
		TableName:                aws.String(re.names.ReadModel),
		Key:                      docKey(projection, key),
		UpdateExpression:         aws.String("SET #e = :e, #s = :s, #d = :d"),
		ExpressionAttributeNames: map[string]string{"#e": dynamo.EpochAttrPref + ambShard, "#s": dynamo.SeqAttrPrefix + ambShard, "#d": dynamo.AttrDoc},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": avN(epoch), ":s": avS(source.PadSeq(seq)),
			":d": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"by": avS("other")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// applyWrites are the writes of an Apply of {k1: put, k2: delete} a case faults, by what the
// write's body contains.
var applyWrites = []struct {
	name  string
	parts func(p string) []string
}{
	{"fence raise", func(p string) []string { return []string{`"` + p + `#"`, `"fence#`} }},
	{"registry add", func(p string) []string { return []string{`"` + p + `#"`, `"collections"`} }},
	{"item put", func(p string) []string { return []string{dynamo.DocPK(p, ambColl), `"k1"`} }},
	{"item delete", func(p string) []string { return []string{dynamo.DocPK(p, ambColl), `"k2"`} }},
}

func TestAmbiguousReadModelApply(t *testing.T) {
	re := newRMFaultEnv(t)
	// Each case applies {k1: put, k2: delete} by epoch 2 over a shard whose epoch 1 applied
	// {k1, k2: put} up to 10, faulting one of its writes: as the batch ending at 20, or as the
	// replay of dead-lettered event 7 (at the shard's cursor, 10).
	for _, replay := range []string{"", "7"} {
		for _, c := range applyWrites {
			for _, kind := range faultproxy.Kinds {
				name := "batch/" + c.name + "/" + kind.String()
				w := write("", 2, "20", putDoc("k1", `{"n":2,"s":"x"}`), delDoc("k2"))
				if replay != "" {
					name, w.Seq, w.Replay = "replay/"+c.name+"/"+kind.String(), "10", replay
				}
				t.Run(name, func(t *testing.T) {
					p := strings.ReplaceAll(name, " ", "-")
					w.Projection = p
					re.applyDirect(t, write(p, 1, "10", putDoc("k1", `{"n":1}`), putDoc("k2", `{"n":1}`)))
					re.arm(kind, re.names.ReadModel, c.parts(p)...)
					if err := re.proxied.Apply(ctxT(t), w); err != nil {
						t.Fatalf("Apply: %v", err)
					}
					re.requireFaulted(t)
					re.requireItem(t, re.names.ReadModel, fenceKey(p), fenceItem(2, w.Seq))
					re.requireItem(t, re.names.ReadModel, registryKey(p), map[string]types.AttributeValue{"cols": &types.AttributeValueMemberSS{Value: []string{ambColl}}})
					k1, k2 := docItem(t, `{"n":2,"s":"x"}`, 2, w.Seq), docItem(t, "", 2, w.Seq)
					if replay != "" {
						k1[dynamo.ReplayAttr(ambShard, replay)], k2[dynamo.ReplayAttr(ambShard, replay)] = avN(2), avN(2)
					}
					re.requireItem(t, re.names.ReadModel, docKey(p, "k1"), k1)
					re.requireItem(t, re.names.ReadModel, docKey(p, "k2"), k2)
				})
			}
		}
	}
	for _, kind := range faultproxy.Kinds {
		t.Run("fence of a newer epoch/"+kind.String(), func(t *testing.T) {
			p := "apply-fenced-" + kind.String()
			re.applyDirect(t, write(p, 3, "30", putDoc("k1", `{"n":3}`)))
			re.arm(kind, re.names.ReadModel, `"`+p+`#"`, `"fence#`)
			if err := re.proxied.Apply(ctxT(t), write(p, 2, "40", putDoc("k1", `{"n":2}`))); !errors.Is(err, readmodel.ErrFenced) {
				t.Fatalf("Apply by epoch 2 over a fence of epoch 3 = %v, want ErrFenced", err)
			}
			re.requireFaultedConflict(t)
			re.requireItem(t, re.names.ReadModel, fenceKey(p), fenceItem(3, "30"))
			re.requireItem(t, re.names.ReadModel, docKey(p, "k1"), docItem(t, `{"n":3}`, 3, "30"))
		})
		t.Run("item of a newer epoch/"+kind.String(), func(t *testing.T) {
			// A newer owner wrote the item after this zombie passed the fence.
			p := "apply-zombie-" + kind.String()
			re.setItem(t, p, "k1", 3, "5")
			re.arm(kind, re.names.ReadModel, dynamo.DocPK(p, ambColl), `"k1"`)
			if err := re.proxied.Apply(ctxT(t), write(p, 2, "20", putDoc("k1", `{"n":2}`))); !errors.Is(err, readmodel.ErrFenced) {
				t.Fatalf("Apply by epoch 2 over an item of epoch 3 = %v, want ErrFenced", err)
			}
			re.requireFaultedConflict(t)
			want := docItem(t, "", 3, "5")
			want[dynamo.AttrDoc] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"by": avS("other")}}
			re.requireItem(t, re.names.ReadModel, docKey(p, "k1"), want)
		})
		t.Run("item overtaken after the applied attempt/"+kind.String(), func(t *testing.T) {
			p := "apply-overtaken-" + kind.String()
			re.arm(kind, re.names.ReadModel, dynamo.DocPK(p, ambColl), `"k1"`)
			re.afterFault(t, func() { re.setItem(t, p, "k1", 3, "25") })
			if err := re.proxied.Apply(ctxT(t), write(p, 2, "20", putDoc("k1", `{"n":2}`))); !errors.Is(err, readmodel.ErrFenced) {
				t.Fatalf("Apply by epoch 2 overtaken by epoch 3 = %v, want ErrFenced", err)
			}
			re.requireFaulted(t)
			want := docItem(t, "", 3, "25")
			want[dynamo.AttrDoc] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"by": avS("other")}}
			re.requireItem(t, re.names.ReadModel, docKey(p, "k1"), want)
		})
	}
}

func TestAmbiguousReadModelClaimWrites(t *testing.T) {
	re := newRMFaultEnv(t)
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			p := "claim-" + kind.String()
			re.applyDirect(t, write(p, 1, "30", putDoc("k1", `{"n":1}`)))
			re.arm(kind, re.names.ReadModel, `"`+p+`#"`, `"fence#`)
			seq, err := re.proxied.ClaimWrites(ctxT(t), p, ambShard, 2)
			if err != nil || seq != "30" {
				t.Fatalf("ClaimWrites = %q, %v; want 30", seq, err)
			}
			re.requireFaulted(t)
			re.requireItem(t, re.names.ReadModel, fenceKey(p), fenceItem(2, "30"))
		})
		t.Run(kind.String()+"/newer epoch stored", func(t *testing.T) {
			p := "claim-fenced-" + kind.String()
			re.applyDirect(t, write(p, 3, "30", putDoc("k1", `{"n":1}`)))
			re.arm(kind, re.names.ReadModel, `"`+p+`#"`, `"fence#`)
			if _, err := re.proxied.ClaimWrites(ctxT(t), p, ambShard, 2); !errors.Is(err, readmodel.ErrFenced) {
				t.Fatalf("ClaimWrites(2) over epoch 3 = %v, want ErrFenced", err)
			}
			re.requireFaultedConflict(t)
			re.requireItem(t, re.names.ReadModel, fenceKey(p), fenceItem(3, "30"))
		})
	}
}

// forgedConflict answers every UpdateItem of a document item with ConditionalCheckFailed
// without sending it: a failed condition whose cause the item does not show.
type forgedConflict struct{ dynamotables.ItemAPI }

func (f forgedConflict) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if sk, ok := in.Key["sk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "k") {
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("forged")}
	}
	return f.ItemAPI.UpdateItem(ctx, in, o...)
}

// TestAmbiguousReadModelUnprovenSkip: an item write whose condition failed is skipped only when
// the item read back holds this write's marker (or a later one); otherwise Apply fails (and is
// not fenced), instead of reporting a write that is not there.
func TestAmbiguousReadModelUnprovenSkip(t *testing.T) {
	re := newRMFaultEnv(t)
	s, err := dynamo.NewReadModel(forgedConflict{re.client}, re.prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, replay := range []string{"", "7"} {
		p := "unproven-" + replay
		w := write(p, 2, "20", putDoc("k1", `{"n":2}`))
		w.Replay = replay
		err := s.Apply(ctxT(t), w)
		if err == nil || errors.Is(err, readmodel.ErrFenced) || !strings.Contains(err.Error(), "apply again") {
			t.Fatalf("Apply (replay %q) with a forged conflict = %v, want an error saying to apply again", replay, err)
		}
		re.requireItem(t, re.names.ReadModel, docKey(p, "k1"), nil)
		// Once the item holds the write (the same batch applied for real), the same forged
		// conflict is resolved as done.
		re.applyDirect(t, w)
		if err := s.Apply(ctxT(t), w); err != nil {
			t.Fatalf("Apply (replay %q) over its own effect with a forged conflict: %v", replay, err)
		}
	}
}
