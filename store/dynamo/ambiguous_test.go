package dynamo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/faultproxy"
)

// Writes whose outcome the client cannot know (the request was applied, the answer lost) are
// made by putting internal/faultproxy between the stores and the server. The stores under test
// use the proxied client (its attempts time out after faultAttemptTimeout, so that a
// DelayThenApply of faultDelay outlives the first attempt); fe.client reads the tables
// directly.
const (
	faultAttemptTimeout = 300 * time.Millisecond
	faultDelay          = 900 * time.Millisecond
)

type faultEnv struct {
	*env
	proxy   *faultproxy.Proxy
	proxied dynamotables.ItemAPI
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	e := newEnv(t)
	p, err := faultproxy.Start(dynamotest.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(p.URL()),
		dynamotables.WithAttemptTimeout(faultAttemptTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return &faultEnv{env: e, proxy: p, proxied: c}
}

// openVia returns the store newStore makes on fe's tables through the proxy.
func openVia[S any](t testing.TB, fe *faultEnv, newStore func(dynamotables.ItemAPI, string) (S, error)) S {
	t.Helper()
	s, err := newStore(fe.proxied, fe.prefix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// arm faults the next write (PutItem, UpdateItem, DeleteItem) to table whose body contains
// every one of parts, once, with kind.
func (fe *faultEnv) arm(kind faultproxy.Kind, table string, parts ...string) {
	fe.proxy.SetRule(faultproxy.Rule{Kind: kind, Limit: 1, Delay: faultDelay, Match: func(r faultproxy.Request) bool {
		if !r.IsWrite() || r.Table != table {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(string(r.Body), p) {
				return false
			}
		}
		return true
	}})
}

// requireFaulted fails t unless exactly one write was faulted since arm and the server
// applied it (it answered 200), which is what the case is about.
func (fe *faultEnv) requireFaulted(t *testing.T) {
	t.Helper()
	fs := fe.proxy.Faults()
	if len(fs) != 1 {
		t.Fatalf("%d writes faulted, want 1", len(fs))
	}
	if fs[0].Status != 200 {
		t.Fatalf("the faulted %s was not applied: the server answered %d %s", fs[0].Request.Op, fs[0].Status, fs[0].Response)
	}
}
