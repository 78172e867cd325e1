package dynamo_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deadletter/deadlettertest"
	"github.com/projhost/projhost/store/dynamo"
)

// dlEnv is a DeadLetters on fresh tables.
type dlEnv struct {
	*env
	s     *dynamo.DeadLetters
	table string // the dead-letter table
}

func newDLEnv(t *testing.T) *dlEnv {
	t.Helper()
	e := newEnv(t)
	return &dlEnv{env: e, s: open(t, e, dynamo.NewDeadLetters), table: e.names.DeadLetters}
}

func TestDeadLetterConformance(t *testing.T) {
	e := newDLEnv(t)
	deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return e.s })
}

// items returns the projection's items by sort key.
func (e *dlEnv) items(t *testing.T, projection string) map[string]map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.Query(ctxT(t), &dynamodb.QueryInput{
		TableName:                 aws.String(e.table),
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": "projection"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projection}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]types.AttributeValue{}
	for _, it := range out.Items {
		m[it["sk"].(*types.AttributeValueMemberS).Value] = it
	}
	return m
}

func (e *dlEnv) get(t *testing.T, projection, shard, seq string) deadletter.Letter {
	t.Helper()
	l, err := e.s.Get(ctxT(t), projection, shard, seq)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pad(seq string) string { return strings.Repeat("0", 129-len(seq)) + seq }

// TestDeadLetterItemLayout: small data is inline in the head item, whose attributes any client
// can read; large data is in chunk items, and the chunks of replaced data are deleted.
func TestDeadLetterItemLayout(t *testing.T) {
	e := newDLEnv(t)
	ctx := ctxT(t)
	l := deadletter.Letter{Projection: "p", ShardID: "shardId-1", Seq: "42", PartitionKey: "DTW", ArrivalMs: 5,
		Data: []byte(`{"a":1}`), ErrorKind: "fail", Error: "bad", Attempts: 2,
		FirstFailure: time.UnixMilli(1000), State: deadletter.StateFailed}
	if err := e.s.Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	its := e.items(t, "p")
	head, ok := its["shardId-1#"+pad("42")]
	if len(its) != 1 || !ok {
		t.Fatalf("items %v, want one head with sort key shard#padded seq", its)
	}
	want := map[string]string{"shard": "shardId-1", "seq": "42", "state": "failed", "partition_key": "DTW", "error_kind": "fail", "error": "bad"}
	for name, v := range want {
		if s, ok := head[name].(*types.AttributeValueMemberS); !ok || s.Value != v {
			t.Errorf("head %s = %#v, want S %q", name, head[name], v)
		}
	}
	for name, v := range map[string]string{"attempts": "2", "arrival_ms": "5", "first_failure_ms": "1000"} {
		if n, ok := head[name].(*types.AttributeValueMemberN); !ok || n.Value != v {
			t.Errorf("head %s = %#v, want N %s", name, head[name], v)
		}
	}
	if b, ok := head["data"].(*types.AttributeValueMemberB); !ok || string(b.Value) != `{"a":1}` {
		t.Errorf("head data = %#v, want the inline bytes", head["data"])
	}
	for _, absent := range []string{"last_failure_ms", "replayed_seq", "chunks"} {
		if _, ok := head[absent]; ok {
			t.Errorf("head has %s for a zero field", absent)
		}
	}

	// 1 MiB: three chunks, no inline data.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	l.Data = big
	if err := e.s.Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	its = e.items(t, "p")
	if len(its) != 4 {
		t.Fatalf("%d items after a 1 MiB Put, want head + 3 chunks", len(its))
	}
	head = its["shardId-1#"+pad("42")]
	if _, ok := head["data"]; ok {
		t.Error("head keeps inline data after a chunked Put")
	}
	if n, ok := head["chunks"].(*types.AttributeValueMemberN); !ok || n.Value != "3" {
		t.Errorf("head chunks = %#v, want 3", head["chunks"])
	}
	if got := e.get(t, "p", "shardId-1", "42"); !bytes.Equal(got.Data, big) {
		t.Fatalf("Get returned %d bytes, want the 1 MiB", len(got.Data))
	}
	// Replaced by other large data, then by small data: old chunks go.
	big2 := bytes.Repeat([]byte{0xff, 0}, 300*1024)
	for _, data := range [][]byte{big2, []byte("x")} {
		l.Data = data
		if err := e.s.Put(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantItems := 1 + (len(data)+dynamo.ChunkBytes-1)/dynamo.ChunkBytes
		if len(data) < dynamo.ChunkBytes {
			wantItems = 1
		}
		if its := e.items(t, "p"); len(its) != wantItems {
			t.Fatalf("%d items after a Put of %d bytes, want %d (replaced chunks deleted)", len(its), len(data), wantItems)
		}
		if got := e.get(t, "p", "shardId-1", "42"); !bytes.Equal(got.Data, data) {
			t.Fatalf("Get returned %d bytes, want %d", len(got.Data), len(data))
		}
	}
}

// TestDeadLetterPutInterrupted: a large Put that fails after writing its chunks, before the head, leaves
// the stored letter as it was; a later Put completes.
func TestDeadLetterPutInterrupted(t *testing.T) {
	e := newDLEnv(t)
	ctx := ctxT(t)
	l := deadletter.Letter{Projection: "p", ShardID: "s", Seq: "1", Data: []byte("old"), State: deadletter.StateReplayRequested}
	if err := e.s.Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	next := l
	next.Data, next.State, next.Attempts = bytes.Repeat([]byte{7}, 900_000), deadletter.StateFailed, 2
	e.api.failUpdateAfter(0)
	if err := e.s.Put(ctx, next); !errors.Is(err, errInjected) {
		t.Fatalf("Put with the head write failing: err = %v, want errInjected", err)
	}
	e.api.unlimit()
	if got := e.get(t, "p", "s", "1"); string(got.Data) != "old" || got.State != deadletter.StateReplayRequested {
		t.Fatalf("after an interrupted Put: %q %s, want the old letter", got.Data, got.State)
	}
	if err := e.s.Put(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "p", "s", "1"); !bytes.Equal(got.Data, next.Data) || got.Attempts != 2 {
		t.Fatalf("after the repeated Put: %d bytes, %d attempts", len(got.Data), got.Attempts)
	}
	ls, err := e.s.List(ctx, "p", deadletter.Filter{})
	if err != nil || len(ls) != 1 {
		t.Fatalf("List = %d letters, %v; want 1 (the orphaned chunks are not letters)", len(ls), err)
	}
}

// TestDeadLetterTooLarge: fields other than the data that exceed an item fail with ErrTooLarge; so do keys
// DynamoDB cannot hold (ErrInvalid).
func TestDeadLetterTooLarge(t *testing.T) {
	e := newDLEnv(t)
	ctx := ctxT(t)
	l := deadletter.Letter{Projection: "p", ShardID: "s", Seq: "1", Error: strings.Repeat("e", dynamo.MaxItemBytes), State: deadletter.StateFailed}
	if err := e.s.Put(ctx, l); !errors.Is(err, dynamo.ErrTooLarge) {
		t.Fatalf("Put with a 400 KB error message: err = %v, want ErrTooLarge", err)
	}
	if _, err := e.s.Get(ctx, "p", "s", "1"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("Get after a refused Put: %v, want ErrNotFound", err)
	}
	l.Error, l.ShardID = "", strings.Repeat("s", dynamo.MaxShardIDBytes+1)
	if err := e.s.Put(ctx, l); !errors.Is(err, deadletter.ErrInvalid) {
		t.Fatalf("Put with a %d-byte shard id: err = %v, want ErrInvalid", len(l.ShardID), err)
	}
	// The longest keys work, with chunked data too.
	l.Projection, l.ShardID = strings.Repeat("p", dynamo.MaxProjectionBytes), strings.Repeat("s", dynamo.MaxShardIDBytes)
	l.Seq, l.Data = "1"+strings.Repeat("0", 128), bytes.Repeat([]byte{1}, 1<<20)
	if err := e.s.Put(ctx, l); err != nil {
		t.Fatalf("Put with the longest keys: %v", err)
	}
	if got := e.get(t, l.Projection, l.ShardID, l.Seq); !bytes.Equal(got.Data, l.Data) {
		t.Fatal("data of the letter with the longest keys differs")
	}
}

// TestDeadLetterCorruptItem: an item projhost did not write is reported, not returned half-decoded.
func TestDeadLetterCorruptItem(t *testing.T) {
	e := newDLEnv(t)
	ctx := ctxT(t)
	if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"projection": &types.AttributeValueMemberS{Value: "p"},
		"sk":         &types.AttributeValueMemberS{Value: "s#" + pad("1")},
		"shard":      &types.AttributeValueMemberS{Value: "s"},
		"seq":        &types.AttributeValueMemberS{Value: "1"},
		"state":      &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Get(ctx, "p", "s", "1"); err == nil || errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("Get of a corrupt item: err = %v, want a decode error", err)
	}
	if _, err := e.s.List(ctx, "p", deadletter.Filter{}); err == nil {
		t.Fatal("List over a corrupt item succeeded")
	}
}
