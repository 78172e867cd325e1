package dynamo_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	// armed is the number of faults the proxy had made when arm was last called: the faults
	// since are the case's.
	armed int
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

// openBoth returns a faultEnv and the store newStore makes on its tables twice: through the
// proxy (the store under test) and directly (to set up and observe).
func openBoth[S any](t *testing.T, newStore func(dynamotables.ItemAPI, string) (S, error)) (fe *faultEnv, proxied, direct S) {
	t.Helper()
	fe = newFaultEnv(t)
	return fe, openVia(t, fe, newStore), open(t, fe.env, newStore)
}

// arm faults the next write (PutItem, UpdateItem, DeleteItem) to table whose body contains
// every one of parts, once, with kind. Cases may share one faultEnv, one after the other.
func (fe *faultEnv) arm(kind faultproxy.Kind, table string, parts ...string) {
	fe.armOp(kind, "", table, parts...)
}

// armOp is arm for writes of the operation op only ("PutItem", "UpdateItem", "DeleteItem";
// "": any write).
func (fe *faultEnv) armOp(kind faultproxy.Kind, op, table string, parts ...string) {
	fe.armed = len(fe.proxy.Faults())
	fe.proxy.SetRule(faultproxy.Rule{Kind: kind, Limit: 1, Delay: faultDelay, Match: func(r faultproxy.Request) bool {
		if !r.IsWrite() || r.Table != table || (op != "" && r.Op != op) {
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
	fs := fe.proxy.Faults()[fe.armed:]
	if len(fs) != 1 {
		t.Fatalf("%d writes faulted, want 1", len(fs))
	}
	if fs[0].Status != 200 {
		t.Fatalf("the faulted %s was not applied: the server answered %d %s", fs[0].Request.Op, fs[0].Status, fs[0].Response)
	}
}

// requireFaultedConflict fails t unless exactly one write was faulted since arm and the server
// refused it with ConditionalCheckFailedException: the attempt met a genuine conflict and the
// client did not learn it from that attempt.
func (fe *faultEnv) requireFaultedConflict(t *testing.T) {
	t.Helper()
	fs := fe.proxy.Faults()[fe.armed:]
	if len(fs) != 1 {
		t.Fatalf("%d writes faulted, want 1", len(fs))
	}
	if fs[0].Status != 400 || !strings.Contains(string(fs[0].Response), "ConditionalCheckFailed") {
		t.Fatalf("the faulted %s met no conflict: the server answered %d %s", fs[0].Request.Op, fs[0].Status, fs[0].Response)
	}
}

// afterFault runs fn once, after the next faulted write was applied and before its client can
// retry it (the proxy holds the answer, and a DelayThenApply holds the requests behind it,
// until fn returns): another writer moving the item between an applied attempt and its retry.
// fn must not write through the proxy.
func (fe *faultEnv) afterFault(t *testing.T, fn func()) {
	t.Helper()
	var once sync.Once
	fe.proxy.OnFault(func(faultproxy.Fault) { once.Do(fn) })
	t.Cleanup(func() { fe.proxy.OnFault(nil) })
}

// item reads the item at key of table directly (strongly consistent); nil when missing.
func (fe *faultEnv) item(t *testing.T, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := fe.client.GetItem(ctxT(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// requireItem fails t unless the item at key of table holds exactly want (keys included).
func (fe *faultEnv) requireItem(t *testing.T, table string, key, want map[string]types.AttributeValue) {
	t.Helper()
	got := fe.item(t, table, key)
	if len(want) == 0 && len(got) == 0 {
		return
	}
	all := maps.Clone(want)
	maps.Copy(all, key)
	if !reflect.DeepEqual(got, all) {
		t.Fatalf("item %s:\n got  %s\n want %s", formatItem(key), formatItem(got), formatItem(all))
	}
}

// formatItem renders an item for a failure message, attributes sorted by name.
func formatItem(it map[string]types.AttributeValue) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(it)) {
		fmt.Fprintf(&b, "%s=", k)
		switch v := it[k].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "S:%q ", v.Value)
		case *types.AttributeValueMemberN:
			fmt.Fprintf(&b, "N:%s ", v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "B:%d bytes ", len(v.Value))
		case *types.AttributeValueMemberSS:
			fmt.Fprintf(&b, "SS:%q ", v.Value)
		default:
			fmt.Fprintf(&b, "%T ", v)
		}
	}
	return strings.TrimSpace(b.String())
}

// avS and avN are attribute values for expected items.
func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
