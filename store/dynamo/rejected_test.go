package dynamo_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
)

// poisonAPI passes every request on, except that a document write whose document has the
// attribute "poison" is sent with a number DynamoDB refuses instead: a document past every
// rule of the host and the store, which only the server refuses (a ValidationException).
type poisonAPI struct{ dynamotables.ItemAPI }

func (p poisonAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d, ok := in.ExpressionAttributeValues[":d"].(*types.AttributeValueMemberM); ok {
		if _, ok := d.Value["poison"]; ok {
			bad := *in
			bad.ExpressionAttributeValues = map[string]types.AttributeValue{}
			for k, v := range in.ExpressionAttributeValues {
				bad.ExpressionAttributeValues[k] = v
			}
			bad.ExpressionAttributeValues[":d"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"poison": &types.AttributeValueMemberN{Value: "not a number"}}}
			in = &bad
		}
	}
	return p.ItemAPI.UpdateItem(ctx, in, o...)
}

// TestDynamoRefusedDocumentReachesThePolicy: a document write DynamoDB refuses as invalid is
// classified as permanent (readmodel.ErrRejected, naming the document) and the core charges it
// to the event whose output it was, dead-lettering that event, instead of retrying the commit
// for ever; the other events' documents are stored.
func TestDynamoRefusedDocumentReachesThePolicy(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	api := poisonAPI{e.api}
	rm, err := dynamo.NewReadModel(api, e.prefix)
	require.NoError(t, err)

	// The store alone: the write fails with a *readmodel.RejectedError, not retried by the SDK.
	err = rm.Apply(ctx, readmodel.Write{Projection: "q", ShardID: "s", Epoch: 1, Seq: "1",
		Mutations: []event.Mutation{{Collection: "c", Key: "bad", Doc: []byte(`{"poison":1}`)}}})
	var rej *readmodel.RejectedError
	require.ErrorAs(t, err, &rej, "%v", err)
	require.ErrorIs(t, err, readmodel.ErrRejected)
	require.Equal(t, [2]string{"c", "bad"}, [2]string{rej.Collection, rej.Key})

	// Through the core.
	leases, err := dynamo.NewLeaseStore(e.api, e.prefix)
	require.NoError(t, err)
	cursors, err := dynamo.NewCursorStore(e.api, e.prefix)
	require.NoError(t, err)
	dls, err := dynamo.NewDeadLetters(e.api, e.prefix)
	require.NoError(t, err)
	st := &store.Stores{Leases: leases, Cursors: cursors, ReadModel: rm, DeadLetters: dls, Mode: store.Fenced,
		WriteClaimer: rm, CheckMutation: dynamo.CheckMutation}
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(context.Background()) })
	wasm, err := os.ReadFile(testwasm.Path(t, testwasm.Echo))
	require.NoError(t, err)
	mod, err := rt.Load(ctx, "echo", wasm)
	require.NoError(t, err)
	var dead []string
	p, err := projection.New(projection.Config{Projection: "p", Stores: st, Modules: projection.Fixed(mod), Logger: slog.New(slog.DiscardHandler),
		Policy: projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 1},
		Hooks:  projection.Hooks{DeadLettered: func(l deadletter.Letter) { dead = append(dead, l.Seq+" "+l.ErrorKind+" "+l.Error) }}})
	require.NoError(t, err)
	sh, err := p.Open(ctx, "s", 1, projection.ShardOptions{})
	require.NoError(t, err)
	evs := []event.Event{
		{ShardID: "s", Seq: "1", PartitionKey: "a", Data: []byte(`{"n":1}`)},
		{ShardID: "s", Seq: "2", PartitionKey: "b", Data: []byte(`{"poison":2}`)},
		{ShardID: "s", Seq: "3", PartitionKey: "c", Data: []byte(`{"n":3}`)},
	}
	require.NoError(t, errors.Join(sh.Handle(ctx, evs), sh.Flush(ctx)))
	sh.Close(ctx)
	require.Len(t, dead, 1)
	require.Contains(t, dead[0], "2 bad_output ")
	require.Contains(t, dead[0], "readmodel: write refused by the store as invalid: document c/b")
	require.Equal(t, "3", sh.Committed())
	for k, want := range map[string]string{"a": `{"n":1}`, "b": "", "c": `{"n":3}`} {
		doc, found, err := rm.Get(ctx, "p", "c", k)
		require.NoError(t, err)
		require.Equal(t, want != "", found, k)
		if found {
			require.JSONEq(t, want, string(doc))
		}
	}
}
