package dynamo_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/readmodel/readmodeltest"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store/dynamo"
)

// rmEnv is a ReadModel on fresh tables.
type rmEnv struct {
	*env
	s     *dynamo.ReadModel
	table string // the read model table
}

func newRMEnv(t testing.TB, opts ...dynamo.ReadModelOption) *rmEnv {
	t.Helper()
	e := newEnv(t)
	s := open(t, e, func(api dynamotables.ItemAPI, prefix string) (*dynamo.ReadModel, error) {
		return dynamo.NewReadModel(api, prefix, opts...)
	})
	return &rmEnv{env: e, s: s, table: e.names.ReadModel}
}

func put(coll, key, doc string) readmodel.Mutation {
	return readmodel.Mutation{Collection: coll, Key: key, Doc: []byte(doc)}
}

func (e *rmEnv) apply(t testing.TB, shard string, epoch int64, seq string, ms ...readmodel.Mutation) {
	t.Helper()
	if err := e.s.Apply(ctxT(t), readmodel.Write{Projection: "p", ShardID: shard, Epoch: epoch, Seq: seq, Mutations: ms}); err != nil {
		t.Fatalf("Apply(%s epoch %d seq %s): %v", shard, epoch, seq, err)
	}
}

func (e *rmEnv) expect(t testing.TB, coll, key, want string) {
	t.Helper()
	doc, found, err := e.s.Get(ctxT(t), "p", coll, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(doc); (want == "") == found || got != want {
		t.Fatalf("Get(%s/%s) = %q found=%v, want %q", coll, key, got, found, want)
	}
}

func TestReadModelConformance(t *testing.T) {
	e := newRMEnv(t)
	readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return e.s }, readmodeltest.Replay{
		// Replays are not tied to dead letters here (no Request). Interrupt applies w through a
		// new sequential ReadModel on the same tables, so that the failure point is known: the
		// fence, its registry write and two item writes go through, the third item write fails
		// and stops the Apply (the suite's replay has more keys). With concurrent item writes
		// the failure would cancel writes in flight, and might leave none written.
		Interrupt: func(t *testing.T, _ readmodel.Store, w readmodel.Write) {
			t.Helper()
			seq := open(t, e.env, func(api dynamotables.ItemAPI, prefix string) (*dynamo.ReadModel, error) {
				return dynamo.NewReadModel(api, prefix, dynamo.WithMaxInFlight(1))
			})
			e.api.failUpdateAfter(1 + 1 + 2)
			defer e.api.unlimit()
			if err := seq.Apply(ctxT(t), w); !errors.Is(err, errInjected) {
				t.Fatalf("interrupted replay Apply: err = %v, want errInjected", err)
			}
		},
	})
}

// TestReadModelItemLayout: documents are native attributes any client can read by key; deletes
// leave a tombstone that keeps the markers.
func TestReadModelItemLayout(t *testing.T) {
	e := newRMEnv(t)
	ctx := ctxT(t)
	e.apply(t, "shardId-1", 3, "42", put("airports", "DTW", `{"origin":"DTW","count":2,"delay":{"max":66.5}}`))
	get := func() map[string]types.AttributeValue {
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "p#airports"},
				"sk": &types.AttributeValueMemberS{Value: "DTW"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	it := get()
	doc, ok := it["doc"].(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("item has no doc map: %#v", it)
	}
	if n, ok := doc.Value["count"].(*types.AttributeValueMemberN); !ok || n.Value != "2" {
		t.Errorf("doc.count = %#v, want N 2", doc.Value["count"])
	}
	if m, ok := it["seq:shardId-1"].(*types.AttributeValueMemberS); !ok || m.Value != strings.Repeat("0", source.SeqWidth-2)+"42" {
		t.Errorf("seq marker = %#v, want 42 zero-padded to source.SeqWidth digits", it["seq:shardId-1"])
	}
	if m, ok := it["epoch:shardId-1"].(*types.AttributeValueMemberN); !ok || m.Value != "3" {
		t.Errorf("epoch marker = %#v, want N 3", it["epoch:shardId-1"])
	}
	e.apply(t, "shardId-1", 3, "43", readmodel.Mutation{Collection: "airports", Key: "DTW"})
	it = get()
	if _, ok := it["doc"]; ok {
		t.Errorf("tombstone still has a doc: %#v", it["doc"])
	}
	if m, ok := it["seq:shardId-1"].(*types.AttributeValueMemberS); !ok || !strings.HasSuffix(m.Value, "43") {
		t.Errorf("tombstone seq marker = %#v, want ...43", it["seq:shardId-1"])
	}
	e.expect(t, "airports", "DTW", "")
}

// TestNumbersThroughDynamoDB: numbers and strings survive the server exactly (canonical form).
func TestNumbersThroughDynamoDB(t *testing.T) {
	e := newRMEnv(t)
	tests := []struct{ in, want string }{
		{`{"a":1.50e2,"b":-0.0,"c":0.001,"d":1e-7,"e":123456789.123456789}`, `{"a":150,"b":0,"c":0.001,"d":0.0000001,"e":123456789.123456789}`},
		{`{"big":12345678901234567890123456789012345678,"max":9.9999999999999999999999999999999999999e125}`,
			`{"big":12345678901234567890123456789012345678,"max":99999999999999999999999999999999999999` + strings.Repeat("0", 88) + `}`},
		{`{"tiny":1e-130,"neg":-42}`, `{"neg":-42,"tiny":0.` + strings.Repeat("0", 129) + `1}`},
		{`{"s":"","u":"\u00e9\u2028\ud83d\ude00","l":[[],{}],"z":null,"t":false}`, `{"l":[[],{}],"s":"","t":false,"u":"é` + "\u2028" + `😀","z":null}`},
	}
	for i, tt := range tests {
		key := fmt.Sprint(i)
		e.apply(t, "s", 1, fmt.Sprint(i+1), put("n", key, tt.in))
		e.expect(t, "n", key, tt.want)
	}
}

// TestDocumentLimits: documents at DynamoDB's limits are stored; one past them fails its Apply
// with ErrBadDocument before any write (DynamoDB and DynamoDB Local would refuse the item write
// with a ValidationException after the fence; dynalite would store it).
func TestDocumentLimits(t *testing.T) {
	e := newRMEnv(t)
	longKey := strings.Repeat("k", 64*1024-1)
	tests := []struct {
		name, doc string
		bad       bool
	}{
		{name: "deepest", doc: dynamo.DeepDoc(dynamo.MaxDocDepth)},
		{name: "deepest arrays", doc: dynamo.DeepArrays(dynamo.MaxDocDepth)},
		{name: "longest key", doc: `{"` + longKey + `":1}`},
		{name: "too deep", doc: dynamo.DeepDoc(dynamo.MaxDocDepth + 1), bad: true},
		{name: "too deep arrays", doc: dynamo.DeepArrays(dynamo.MaxDocDepth + 1), bad: true},
		{name: "key too long", doc: `{"` + longKey + `k":1}`, bad: true},
		{name: "empty key", doc: `{"":1}`, bad: true},
		{name: "nested empty key", doc: `{"a":[{"":1}]}`, bad: true},
		{name: "number too large", doc: `{"v":1e400}`, bad: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.api.reset()
			err := e.s.Apply(ctxT(t), readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: fmt.Sprint(i + 1),
				Mutations: []readmodel.Mutation{put("c", "ok"+tt.name, `{"v":1}`), put("c", tt.name, tt.doc)}})
			if !tt.bad {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				e.expect(t, "c", tt.name, tt.doc)
				return
			}
			if !errors.Is(err, dynamo.ErrBadDocument) {
				t.Fatalf("Apply with a bad document: err = %v, want ErrBadDocument", err)
			}
			if _, u := e.api.reset(); u != 0 {
				t.Fatalf("%d UpdateItems issued for a refused Apply, want 0", u)
			}
			e.expect(t, "c", "ok"+tt.name, "")
		})
	}
}

// TestZombieFencedAtItem: a zombie that got past the fence before the new owner raised it is
// still refused at every item the new owner wrote.
func TestZombieFencedAtItem(t *testing.T) {
	e := newRMEnv(t)
	ctx := ctxT(t)
	e.apply(t, "s", 1, "10", put("c", "k", `{"owner":1}`))
	e.apply(t, "s", 2, "11", put("c", "k", `{"owner":2}`))
	// Simulate the race: the zombie's fence check happened before epoch 2 raised the fence.
	if _, err := e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "p#"},
			"sk": &types.AttributeValueMemberS{Value: "fence#s"},
		}}); err != nil {
		t.Fatal(err)
	}
	err := e.s.Apply(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "50",
		Mutations: []readmodel.Mutation{put("c", "k", `{"owner":"zombie"}`), put("c", "fresh", `{"owner":"zombie"}`)}})
	if !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("zombie Apply: err = %v, want ErrFenced", err)
	}
	e.expect(t, "c", "k", `{"owner":2}`)
}

// TestPartialApplyCompletesOnReplay: an Apply that fails half way is completed by replaying it;
// keys written by the first attempt are skipped, not rewritten.
func TestPartialApplyCompletesOnReplay(t *testing.T) {
	e := newRMEnv(t, dynamo.WithMaxInFlight(1)) // sequential, so the failure point is known
	var ms []readmodel.Mutation
	for i := range 10 {
		ms = append(ms, put("c", fmt.Sprintf("k%d", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	w := readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "7", Mutations: ms}
	e.api.failUpdateAfter(1 + 1 + 4) // fence, registry, 4 items
	if err := e.s.Apply(ctxT(t), w); !errors.Is(err, errInjected) {
		t.Fatalf("Apply with injected failure: err = %v, want errInjected", err)
	}
	e.expect(t, "c", "k3", `{"i":3}`)
	e.expect(t, "c", "k4", "")
	seq, epoch, err := e.s.HighWater(ctxT(t), "p", "s")
	if err != nil || seq != "7" || epoch != 1 {
		t.Fatalf("HighWater = %q, %d, %v; want 7, 1", seq, epoch, err)
	}
	e.api.unlimit()
	e.api.reset()
	// The replay is computed from the current state, so it differs for the applied keys: they
	// must keep the first attempt's documents.
	for i := range ms {
		ms[i].Doc = []byte(fmt.Sprintf(`{"i":%d,"replayed":true}`, i))
	}
	if err := e.s.Apply(ctxT(t), w); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		want := fmt.Sprintf(`{"i":%d}`, i)
		if i >= 4 {
			want = fmt.Sprintf(`{"i":%d,"replayed":true}`, i)
		}
		e.expect(t, "c", fmt.Sprintf("k%d", i), want)
	}
}

// TestRequestsPerApply pins the number of DynamoDB requests of an Apply (the cost model in the
// package documentation).
func TestRequestsPerApply(t *testing.T) {
	e := newRMEnv(t)
	const n = 40
	mk := func(seq int) []readmodel.Mutation {
		var ms []readmodel.Mutation
		for i := range n {
			ms = append(ms, put(fmt.Sprint("c", i%2), fmt.Sprint("k", i), fmt.Sprintf(`{"seq":%d}`, seq)))
		}
		ms = append(ms, put("c0", "k0", `{"again":true}`)) // same key twice: one write
		return ms
	}
	// A skipped item is read back unless the server returned it with the failed condition
	// (ReturnValuesOnConditionCheckFailure: DynamoDB and DynamoDB Local do, dynalite does not).
	var readBack int64 = n
	if returnsItemOnConditionFailure(t, e.env) {
		readBack = 0
	}
	tests := []struct {
		name          string
		seq           int
		gets, updates int64
	}{
		{"first (registers 2 collections)", 1, 0, 1 + 1 + n},
		{"steady state", 2, 0, 1 + n},
		{"replay: every item skipped and read back", 2, readBack, 1 + n},
		{"older replay: fence read back too", 1, 1 + readBack, 1 + n},
	}
	for _, tt := range tests {
		e.api.reset()
		e.apply(t, "s", 1, fmt.Sprint(tt.seq), mk(tt.seq)...)
		if g, u := e.api.reset(); g != tt.gets || u != tt.updates {
			t.Errorf("%s: %d GetItem + %d UpdateItem, want %d + %d", tt.name, g, u, tt.gets, tt.updates)
		}
	}
	e.expect(t, "c0", "k0", `{"again":true}`)
	e.expect(t, "c1", "k1", `{"seq":2}`)
}

// BenchmarkApply measures Apply of 100 distinct keys (one per flight origin-like key) per
// Write; items/s counts conditional item writes.
func BenchmarkApply(b *testing.B) {
	for _, inFlight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			e := newRMEnv(b, dynamo.WithMaxInFlight(inFlight))
			const n = 100
			ms := make([]readmodel.Mutation, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range ms {
					ms[k] = put("airports", fmt.Sprint("K", k), fmt.Sprintf(`{"count":%d,"delay":{"sum":%d,"max":66}}`, i, i*7))
				}
				e.apply(b, "s", 1, fmt.Sprint(i+1), ms...)
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// TestClaimWrites: a new owner's claim returns the high-water sequence of the last Apply begun
// and fences every later Apply of an older epoch, before the new owner wrote anything.
func TestClaimWrites(t *testing.T) {
	e := newRMEnv(t)
	ctx := ctxT(t)
	hw, err := e.s.ClaimWrites(ctx, "p", "s", 1)
	if err != nil || hw != "" {
		t.Fatalf("first claim = %q, %v; want \"\", nil", hw, err)
	}
	e.apply(t, "s", 1, "42", put("c", "k", `{"n":1}`))
	hw, err = e.s.ClaimWrites(ctx, "p", "s", 2)
	if err != nil || hw != "42" {
		t.Fatalf("claim by epoch 2 = %q, %v; want \"42\", nil", hw, err)
	}
	// The old owner's late Apply is refused although the new owner has not written yet.
	err = e.s.Apply(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "43",
		Mutations: []readmodel.Mutation{put("c", "k", `{"n":2}`), put("c", "other", `{"n":1}`)}})
	if !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("late Apply by epoch 1: err = %v, want ErrFenced", err)
	}
	e.expect(t, "c", "k", `{"n":1}`)
	e.expect(t, "c", "other", "")
	if _, err := e.s.ClaimWrites(ctx, "p", "s", 1); !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("claim by an older epoch: err = %v, want ErrFenced", err)
	}
	if hw, err := e.s.ClaimWrites(ctx, "p", "s", 2); err != nil || hw != "42" {
		t.Fatalf("claim again by epoch 2 = %q, %v; want \"42\", nil (idempotent)", hw, err)
	}
}

// TestReplayItemLayout: a replay writes its own marker on each item and leaves the shard's
// sequence marker and the fence's high-water mark as they were; a repeated replay is skipped at
// every item (read back, not rewritten).
func TestReplayItemLayout(t *testing.T) {
	e := newRMEnv(t)
	ctx := ctxT(t)
	e.apply(t, "shardId-1", 3, "42", put("c", "old", `{"n":1}`))
	get := func(k string) map[string]types.AttributeValue {
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "p#c"},
				"sk": &types.AttributeValueMemberS{Value: k},
			}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	before := get("old")["seq:shardId-1"]
	w := readmodel.Write{Projection: "p", ShardID: "shardId-1", Epoch: 4, Seq: "42", Replay: "17",
		Mutations: []readmodel.Mutation{put("c", "old", `{"n":2}`), put("c", "new", `{"n":1}`)}}
	e.api.reset()
	if err := e.s.Apply(ctx, w); err != nil {
		t.Fatal(err)
	}
	if g, u := e.api.reset(); g != 0 || u != 1+2 {
		t.Errorf("replay Apply: %d GetItem + %d UpdateItem, want 0 + 3 (fence epoch, 2 items)", g, u)
	}
	marker := "r:shardId-1:" + strings.Repeat("0", source.SeqWidth-2) + "17"
	if dynamo.ReplayAttr("shardId-1", "17") != marker {
		t.Fatalf("ReplayAttr = %q, want %q", dynamo.ReplayAttr("shardId-1", "17"), marker)
	}
	for _, k := range []string{"old", "new"} {
		it := get(k)
		if m, ok := it[marker].(*types.AttributeValueMemberN); !ok || m.Value != "4" {
			t.Errorf("%s: replay marker %s = %#v, want N 4 (the epoch)", k, marker, it[marker])
		}
		if m, ok := it["epoch:shardId-1"].(*types.AttributeValueMemberN); !ok || m.Value != "4" {
			t.Errorf("%s: epoch marker = %#v, want N 4", k, it["epoch:shardId-1"])
		}
	}
	if got := get("old")["seq:shardId-1"]; !reflect.DeepEqual(got, before) {
		t.Errorf("replay changed the sequence marker: %#v, was %#v", got, before)
	}
	if _, ok := get("new")["seq:shardId-1"]; ok {
		t.Error("replay set a sequence marker on a new item")
	}
	if seq, epoch, err := e.s.HighWater(ctx, "p", "shardId-1"); err != nil || seq != "42" || epoch != 4 {
		t.Errorf("HighWater after the replay = %q, %d, %v; want 42 (unchanged), epoch 4", seq, epoch, err)
	}
	w.Mutations = []readmodel.Mutation{put("c", "old", `{"n":3}`), put("c", "new", `{"n":2}`)}
	e.api.reset()
	if err := e.s.Apply(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Both items are skipped after examining them: read back, unless the server returned them
	// with the failed condition (DynamoDB Local, AWS).
	var readBack int64 = 2
	if returnsItemOnConditionFailure(t, e.env) {
		readBack = 0
	}
	if g, u := e.api.reset(); g != readBack || u != 1+2 {
		t.Errorf("repeated replay Apply: %d GetItem + %d UpdateItem, want %d + 3 (both items skipped)", g, u, readBack)
	}
	e.expect(t, "c", "old", `{"n":2}`)
	e.expect(t, "c", "new", `{"n":1}`)
	// A zombie's replay that got past the fence is refused at the items by their epoch marker.
	w.Epoch, w.Replay = 3, "18"
	if err := e.s.Apply(ctx, w); !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("replay by epoch 3 after epoch 4: err = %v, want ErrFenced", err)
	}
	if err := e.s.Apply(ctx, readmodel.Write{Projection: "p", ShardID: "shardId-1", Epoch: 4, Seq: "42", Replay: "017",
		Mutations: w.Mutations}); !errors.Is(err, dynamo.ErrBadReplay) {
		t.Fatalf("replay of a non-canonical sequence number: err = %v, want ErrBadReplay", err)
	}
	if _, u := e.api.reset(); u != 1 { // the zombie's fence attempt only
		t.Errorf("%d UpdateItems for the refused replays, want 1", u)
	}
}

// returnsItemOnConditionFailure reports whether the server under test returns the item with a
// ConditionalCheckFailedException when asked to (ReturnValuesOnConditionCheckFailure ALL_OLD).
func returnsItemOnConditionFailure(t *testing.T, e *env) bool {
	t.Helper()
	key := map[string]types.AttributeValue{
		dynamotables.ReadModelPK: &types.AttributeValueMemberS{Value: "probe#"},
		dynamotables.ReadModelSK: &types.AttributeValueMemberS{Value: "probe"},
	}
	item := map[string]types.AttributeValue{"x": &types.AttributeValueMemberN{Value: "1"}}
	for k, v := range key {
		item[k] = v
	}
	_, err := e.client.PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(e.names.ReadModel), Item: item})
	require.NoError(t, err)
	_, err = e.client.PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(e.names.ReadModel), Item: item,
		ConditionExpression:                 aws.String("attribute_not_exists(x)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf)
	return ccf.Item != nil
}

// TestGetKeyOverLimits: a key or collection the table cannot hold has no document; Get answers
// found=false without asking DynamoDB (DynamoDB Local answers a ValidationException).
func TestGetKeyOverLimits(t *testing.T) {
	e := newRMEnv(t)
	ctx := ctxT(t)
	longest := strings.Repeat("😀", 256) // 1024 bytes: the longest sort key
	e.apply(t, "s", 1, "10", put("c", longest, `{"n":1}`))
	for _, c := range []struct {
		name, coll, key string
		found           bool
	}{
		{"longest key", "c", longest, true},
		{"key of 1025 bytes", "c", longest + "k", false},
		{"key of 1028 bytes", "c", longest + "😀", false},
		{"collection over the partition key limit", strings.Repeat("c", 2048), "k", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, found, err := e.s.Get(ctx, "p", c.coll, c.key)
			require.NoError(t, err)
			require.Equal(t, c.found, found)
			if c.found {
				require.JSONEq(t, `{"n":1}`, string(doc))
			}
		})
	}
}
