package esm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/esm"
	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/readmodel"
)

// CostsEnv runs TestCosts: "1". CostsHandlerEnv picks its handler: "count" for count-as (a
// count per origin: few documents), else flightdelays-as (many documents per event).
const (
	CostsEnv        = "PROJHOST_COST_MEASURE"
	CostsHandlerEnv = "PROJHOST_COST_HANDLER"
)

// requestCounter counts DynamoDB requests by operation and table suffix (the part after the
// prefix: leases, cursors, readmodel, deadletters, modules).
type requestCounter struct {
	prefix string
	mu     sync.Mutex
	n      map[string]int // "op table"
}

func (c *requestCounter) observe(r faultproxy.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Op+" "+strings.TrimPrefix(r.Table, c.prefix)]++
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// isWrite reports whether a DynamoDB operation consumes write capacity.
func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// TestCosts (PROJHOST_COST_MEASURE=1; README, "Choosing a mode"): the DynamoDB requests and the
// Lambda invocations one projection's events cost in each mode, through a counting proxy in
// front of the DynamoDB server: flights-2k (flights-20k with PROJHOST_ESM_FLIGHTS=20k) on a
// 4-shard stream, flightdelays-as (count-as with PROJHOST_COST_HANDLER=count), the template's BatchSize (500) and batching window (1 s) in
// Lambda mode, one `projhost run --until-caught-up` worker with its defaults in container mode.
// It prints requests per million events by operation and table, and checks both read models.
func TestCosts(t *testing.T) {
	if os.Getenv(CostsEnv) != "1" {
		t.Skip(CostsEnv + "=1 measures the requests per million events of both modes")
	}
	const shards = 4
	data := "flights-2k.json"
	if os.Getenv(FlightsEnv) == "20k" {
		data = "flights-20k.json"
	}
	fs := flightcheck.Load(t, flightcheck.DataPath(data))
	name, check := testwasm.FlightDelaysAS, func(docs []readmodel.Doc) { flightcheck.Check(t, fs, docs) }
	if os.Getenv(CostsHandlerEnv) == "count" {
		name, check = testwasm.CountAS, func(docs []readmodel.Doc) {
			want := map[string]int{}
			for _, f := range fs {
				want[f.Origin]++
			}
			got := map[string]int{}
			for _, d := range docs {
				var c struct{ Count int }
				require.NoError(t, json.Unmarshal(d.Doc, &c))
				got[d.Key] = c.Count
			}
			require.Equal(t, want, got)
		}
	}
	module := testwasm.Path(t, name)
	projhost := filepath.Join(t.TempDir(), "projhost")
	require.NoError(t, goBuild(testwasm.RepoRoot(t), projhost, "./cmd/projhost"))
	le := newLambdaEnv(t)
	le.deploy(t, "lambda-p", name)

	proxy, err := faultproxy.Start(dynamotest.Endpoint(t))
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	counter := &requestCounter{prefix: le.prefix, n: map[string]int{}}
	proxy.OnRequest(counter.observe)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	kc := kinesistest.Client(t)
	stream, arn := kinesistest.Stream(t, kc, shards)
	putFlights(ctx, t, kc, stream, fs, flightcheck.Flight.JSON)

	type result struct {
		mode        string
		elapsed     time.Duration
		invocations int64
		requests    map[string]int
	}
	var results []result

	// Lambda mode: the emulators' bootstraps reach DynamoDB through the proxy.
	counter.take()
	start := time.Now()
	_, _, invokers := le.shardEmulators(ctx, t, kc, arn, shards, "lambda-p", t.TempDir(),
		"PROJHOST_DYNAMODB_ENDPOINT="+proxy.URL())
	var invocations atomic.Int64
	cfg := driverConfig(t, kc, arn, invokers)
	cfg.BatchSize, cfg.MaximumBatchingWindow = 500, time.Second
	cfg.Hooks.Invoked = func(esm.InvokeInfo) { invocations.Add(1) }
	d, err := esm.New(cfg)
	require.NoError(t, err)
	require.NoError(t, d.RunToTip(ctx))
	results = append(results, result{"lambda", time.Since(start), invocations.Load(), counter.take()})
	check(le.docs(t, "lambda-p"))

	// Container mode: one worker.
	start = time.Now()
	run := exec.CommandContext(ctx, projhost, "run", "--source", "kinesis", "--stream", stream,
		"--kinesis-endpoint", kinesistest.Endpoint(t), "--store", "dynamodb", "--dynamodb-endpoint", proxy.URL(),
		"--table-prefix", le.prefix, "--module-store", t.TempDir(), "--name", "container-p", "--handler", module,
		"--until-caught-up", "--log-level", "warn")
	out, err := run.CombinedOutput()
	require.NoError(t, err, "projhost run --until-caught-up: %s", out)
	results = append(results, result{"container", time.Since(start), 0, counter.take()})
	check(le.docs(t, "container-p"))

	// Requests per million events, by operation and table; the documents the read model holds
	// at the end, for scale.
	docs := len(le.docs(t, "lambda-p"))
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%s: %d events, %d shards, %d read-model documents at the end\n", name, len(fs), shards, docs)
	fmt.Fprintln(w, "mode\telapsed\tinvocations/1M\twrites/1M\treads/1M\tby operation and table (per 1M events)")
	per := func(n int) float64 { return float64(n) * 1e6 / float64(len(fs)) }
	for _, r := range results {
		var writes, reads int
		var keys []string
		for k, n := range r.requests {
			keys = append(keys, k)
			if isWrite(strings.Fields(k)[0]) {
				writes += n
			} else {
				reads += n
			}
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, per(r.requests[k])))
		}
		fmt.Fprintf(w, "%s\t%v\t%.0f\t%.0f\t%.0f\t%s\n", r.mode, r.elapsed.Round(time.Millisecond), per(int(r.invocations)),
			per(writes), per(reads), strings.Join(parts, ", "))
	}
	w.Flush()
	t.Log("\n" + b.String())
}
