// Package storetest gives tests every store backend behind store.Stores: the embedded SQLite
// store and DynamoDB (a real local server through internal/dynamotest; call dynamotest.Main from
// the test package's TestMain). Tests that must hold on every backend range over Backends.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
	"github.com/projhost/projhost/store/sqlite"
)

// Backend opens one kind of store for a test.
type Backend struct {
	Name string // "sqlite" or "dynamodb"
	// Open returns fresh, empty stores, closed when t ends. Calling it again with the same t
	// returns stores on the same data (another handle, as a second worker would open).
	Open func(t testing.TB) *store.Stores
}

// Backends returns the SQLite and DynamoDB backends.
func Backends() []Backend {
	return []Backend{{Name: "sqlite", Open: openSQLite}, {Name: "dynamodb", Open: openDynamo}}
}

var (
	mu       sync.Mutex
	dirs     = map[testing.TB]string{}
	prefixes = map[testing.TB]string{}
)

// once returns m[t], creating it with mk the first time (removed again when t ends).
func once(t testing.TB, m map[testing.TB]string, mk func() string) string {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := m[t]; ok {
		return v
	}
	v := mk()
	m[t] = v
	t.Cleanup(func() { mu.Lock(); delete(m, t); mu.Unlock() })
	return v
}

func openSQLite(t testing.TB) *store.Stores {
	t.Helper()
	dir := once(t, dirs, t.TempDir)
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openDynamo(t testing.TB) *store.Stores {
	t.Helper()
	c := dynamotest.Client(t)
	prefix := once(t, prefixes, func() string { _, p := dynamotest.Tables(t); return p })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := dynamo.Open(ctx, dynamo.Config{Client: c, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
