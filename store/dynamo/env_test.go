package dynamo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/store/dynamo"
)

// The tests of this package run against a local server (internal/dynamotest; the Makefile's
// test-dynamo target finds the DynamoDB test packages by their import of it).
func TestMain(m *testing.M) { dynamotest.Main(m) }

var errInjected = errors.New("injected failure")

// faultyAPI wraps the client the stores under test use: it counts requests by kind and can
// fail an UpdateItem after a budget (failUpdateAfter). PutItems and DeleteItems always pass.
type faultyAPI struct {
	dynamotables.ItemAPI
	gets, updates, queries atomic.Int64
	updateBudget           atomic.Int64 // UpdateItems let through before one fails; < 0: unlimited
}

func newFaultyAPI(api dynamotables.ItemAPI) *faultyAPI {
	f := &faultyAPI{ItemAPI: api}
	f.updateBudget.Store(-1)
	return f
}

func (f *faultyAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets.Add(1)
	return f.ItemAPI.GetItem(ctx, in, o...)
}

func (f *faultyAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f.updateBudget.Load() >= 0 && f.updateBudget.Add(-1) < 0 {
		return nil, errInjected
	}
	f.updates.Add(1)
	return f.ItemAPI.UpdateItem(ctx, in, o...)
}

func (f *faultyAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.queries.Add(1)
	return f.ItemAPI.Query(ctx, in, o...)
}

// failUpdateAfter lets n more UpdateItems through and fails the next one with errInjected (a
// few, when they race for the last of the budget); the ones after it pass again. The store's
// own reaction to the failure (an Apply cancels its other writes) decides what else is written.
func (f *faultyAPI) failUpdateAfter(n int64) { f.updateBudget.Store(n) }

// unlimit lets every UpdateItem through again.
func (f *faultyAPI) unlimit() { f.updateBudget.Store(-1) }

// reset returns the GetItems and (passed) UpdateItems counted since the last reset.
func (f *faultyAPI) reset() (gets, updates int64) {
	return f.gets.Swap(0), f.updates.Swap(0)
}

// env is a fresh set of tables. Stores made by open go through api; client bypasses it.
type env struct {
	api    *faultyAPI
	client *dynamodb.Client
	prefix string
	names  dynamotables.Names
}

func newEnv(t testing.TB) *env {
	t.Helper()
	client, prefix := dynamotest.Tables(t)
	names, err := dynamotables.NamesFor(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &env{api: newFaultyAPI(client), client: client, prefix: prefix, names: names}
}

// open returns the store newStore makes on e's tables, through e.api.
func open[S any](t testing.TB, e *env, newStore func(dynamotables.ItemAPI, string) (S, error)) S {
	t.Helper()
	s, err := newStore(e.api, e.prefix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ctxT returns a context that ends with the test, after a minute at the latest.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestNewBadPrefix: every constructor, Open and CreateTables refuse a prefix that cannot form
// table names, before any request.
func TestNewBadPrefix(t *testing.T) {
	const bad = "bad prefix"
	news := map[string]func() error{
		"NewLeaseStore":  func() error { _, err := dynamo.NewLeaseStore(nil, bad); return err },
		"NewCursorStore": func() error { _, err := dynamo.NewCursorStore(nil, bad); return err },
		"NewReadModel":   func() error { _, err := dynamo.NewReadModel(nil, bad); return err },
		"NewDeadLetters": func() error { _, err := dynamo.NewDeadLetters(nil, bad); return err },
		"Open": func() error {
			_, err := dynamo.Open(ctxT(t), dynamo.Config{Endpoint: "http://127.0.0.1:1", Prefix: bad})
			return err
		},
		"CreateTables": func() error {
			return dynamo.CreateTables(ctxT(t), dynamo.Config{Endpoint: "http://127.0.0.1:1", Prefix: bad})
		},
	}
	for name, fn := range news {
		if err := fn(); !errors.Is(err, dynamo.ErrBadPrefix) {
			t.Errorf("%s(bad prefix) error = %v, want ErrBadPrefix", name, err)
		}
	}
}
