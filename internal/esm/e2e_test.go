package esm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/esm"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/s3test"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/registry/s3blobs"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
)

func TestMain(m *testing.M) {
	os.Exit(kinesistest.RunFunc(func() int { return s3test.RunFunc(func() int { return dynamotest.Run(m) }) }))
}

// FlightsEnv selects the e2e's data set: "20k" for flights-20k (kinesis-local takes about a
// minute to take it on a loaded machine), else flights-2k.
const FlightsEnv = "PROJHOST_ESM_FLIGHTS"

// lambdaEnv is a Lambda function's world on the local servers: the DynamoDB tables, the module
// bucket, the emulator and bootstrap binaries.
type lambdaEnv struct {
	st                  *store.Stores
	blobs               *s3blobs.Blobs
	prefix, bucket      string
	rie, bootstrap, dir string
}

func newLambdaEnv(t *testing.T) *lambdaEnv {
	t.Helper()
	ctx := context.Background()
	root := testwasm.RepoRoot(t)
	var le lambdaEnv
	var wg sync.WaitGroup
	var rieErr error
	wg.Go(func() { le.rie, rieErr = esm.BuildEmulator(root) })
	le.dir = t.TempDir()
	le.bootstrap = filepath.Join(le.dir, "bootstrap")
	require.NoError(t, goBuild(root, le.bootstrap, "./cmd/bootstrap", "-tags", "lambda.norpc"))
	_, le.prefix = dynamotest.Tables(t)
	var err error
	le.st, err = dynamo.Open(ctx, dynamo.Config{Endpoint: dynamotest.Endpoint(t), Prefix: le.prefix})
	require.NoError(t, err)
	c := s3test.Client(t)
	le.bucket = s3test.Bucket(t, c)
	le.blobs, err = s3blobs.Open(ctx, c, le.bucket, "modules/")
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, rieErr)
	return &le
}

// goBuild builds the command package pkg of the repository at root (static, no cgo) into out.
func goBuild(root, out, pkg string, flags ...string) error {
	build := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// deploy deploys the testwasm module as projection proj's active version.
func (le *lambdaEnv) deploy(t *testing.T, proj, module string) {
	t.Helper()
	rt, err := host.NewRuntime(context.Background(), host.WithCacheDir(t.TempDir()), host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer rt.Close(context.Background())
	d, err := deploy.New(deploy.Config{Registry: le.st.Registry, Blobs: le.blobs, Runtime: rt, SmokeEvents: -1})
	require.NoError(t, err)
	wasm, err := os.ReadFile(testwasm.Path(t, module))
	require.NoError(t, err)
	r, err := d.Deploy(context.Background(), proj, wasm, deploy.Options{Activate: true})
	require.NoError(t, err)
	require.True(t, r.Activated)
}

// emulator starts one emulator running the bootstrap for projection proj with the compilation
// cache in cacheDir and extra environment; stopped when t ends. Its output goes to a file,
// printed when t failed.
func (le *lambdaEnv) emulator(t *testing.T, name, proj, cacheDir string, extra ...string) *esm.Emulator {
	t.Helper()
	logPath := filepath.Join(le.dir, name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + le.dir, "TMPDIR=" + os.TempDir(), "AWS_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60", "PROJHOST_PROJECTION=" + proj, "PROJHOST_MODULE_STORE=s3://" + le.bucket + "/modules/",
		"PROJHOST_TABLE_PREFIX=" + le.prefix, "PROJHOST_DYNAMODB_ENDPOINT=" + dynamotest.Endpoint(t),
		"PROJHOST_S3_ENDPOINT=" + s3test.Endpoint(t), "PROJHOST_CACHE_DIR=" + cacheDir, "PROJHOST_LOG_LEVEL=warn"}
	e, err := esm.StartEmulator(esm.EmulatorConfig{RIE: le.rie, Bootstrap: le.bootstrap, Env: append(env, extra...), Output: f})
	require.NoError(t, err)
	t.Cleanup(func() {
		e.Stop()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("emulator %s output (tail):\n%s", name, b)
		}
	})
	return e
}

func (le *lambdaEnv) docs(t *testing.T, proj string) []readmodel.Doc {
	t.Helper()
	ds, err := le.st.ReadModel.Scan(context.Background(), proj, "")
	require.NoError(t, err)
	return ds
}

// putFlights puts flights on stream in one go, partition key origin, data(flight) the data; the
// records of a key must keep their order.
func putFlights(ctx context.Context, t *testing.T, kc *kinesis.Client, stream string, fs []flightcheck.Flight, data func(flightcheck.Flight) []byte) {
	t.Helper()
	entries := make([]types.PutRecordsRequestEntry, len(fs))
	for i, f := range fs {
		entries[i] = types.PutRecordsRequestEntry{Data: data(f), PartitionKey: aws.String(f.Origin)}
	}
	resent, err := kinesistest.Put(ctx, kc, stream, entries)
	require.NoError(t, err)
	require.Zero(t, resent, "the records of a key must keep their order")
}

// shardEmulators lists the n shards of the stream and starts one emulator (le.emulator, named
// by its shard) per shard for projection proj, sharing the compilation cache directory cache.
func (le *lambdaEnv) shardEmulators(ctx context.Context, t *testing.T, kc *kinesis.Client, arn string, n int, proj, cache string,
	extra ...string) ([]types.Shard, map[string]*esm.Emulator, esm.PerShard) {
	t.Helper()
	ls, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamARN: aws.String(arn)})
	require.NoError(t, err)
	require.Len(t, ls.Shards, n)
	emus := map[string]*esm.Emulator{}
	invokers := esm.PerShard{}
	for _, s := range ls.Shards {
		id := aws.ToString(s.ShardId)
		emus[id] = le.emulator(t, id, proj, cache, extra...)
		invokers[id] = emus[id]
	}
	return ls.Shards, emus, invokers
}

// driverConfig is the e2e's driver configuration on the stream: partial batch responses, 3
// retries, no record age limit, quick polls and retries; an on-failure record fails t.
func driverConfig(t *testing.T, kc *kinesis.Client, arn string, invoker esm.Invoker) esm.Config {
	return esm.Config{Kinesis: kc, StreamARN: arn, Invoker: invoker, ReportBatchItemFailures: true,
		MaximumRetryAttempts: 3, MaximumRecordAge: -1, PollInterval: 100 * time.Millisecond,
		RetryBackoff: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		OnFailure: func(fr esm.FailureRecord) { t.Errorf("unexpected on-failure record: %+v", fr) }}
}

// streamTips reads the whole stream: every shard's last sequence number, and its events.
func streamTips(ctx context.Context, t *testing.T, kc *kinesis.Client, stream string) (map[string]string, map[string][]source.Event) {
	t.Helper()
	_, byShard, err := kinesistest.ReadStream(ctx, kc, stream)
	require.NoError(t, err)
	tips := map[string]string{}
	for id, evs := range byShard {
		tips[id] = evs[len(evs)-1].Seq
	}
	return tips, byShard
}

// TestEmulator (issue 12): flightdelays-as, the active version in the registry (S3), run by the
// real bootstrap under the real Runtime Interface Emulator, one emulator per shard, fed by the
// driver from a 4-shard stream on kinesis-local holding flights-2k (flights-20k with
// PROJHOST_ESM_FLIGHTS=20k; partition key origin), with the read model in DynamoDB:
//   - every shard's checkpoint ends at its tip and the read model is exact, although the
//     bootstrap of shard 0 is killed (kill -9) during its second invocation: the emulator
//     reports a function error, the driver retries the batch, nothing is lost or doubled;
//   - a batch delivered again changes nothing;
//   - a malformed flight appended (the strict handler always fails on it), under the error
//     policy retry: every invocation answers exactly its sequence number in batchItemFailures,
//     the driver gives the rest of the batch up after MaximumRetryAttempts (on-failure record
//     from it); delivered again under dead-letter, the flight lands in the dead-letter table
//     with its data and the shard goes on past it.
//
// It logs the invocations' events/s per shard.
func TestEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the emulator e2e takes a minute")
	}
	const proj, shards = "flights", 4
	data := "flights-2k.json"
	if os.Getenv(FlightsEnv) == "20k" {
		data = "flights-20k.json"
	}
	fs := flightcheck.Load(t, flightcheck.DataPath(data))
	le := newLambdaEnv(t)
	le.deploy(t, proj, testwasm.FlightDelaysAS)

	// About 90 s on an idle 2-core machine; the bound is for a CI run with the other suites
	// beside it (dynalite's writes are most of the time).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kc := kinesistest.Client(t)
	stream, arn := kinesistest.Stream(t, kc, shards)
	put := func(fs []flightcheck.Flight, data func(flightcheck.Flight) []byte) {
		putFlights(ctx, t, kc, stream, fs, data)
	}
	start := time.Now()
	put(fs, flightcheck.Flight.JSON)
	t.Logf("%d flights put in %v", len(fs), time.Since(start).Round(time.Millisecond))

	cache := t.TempDir()
	ls, emus, invokers := le.shardEmulators(ctx, t, kc, arn, shards, proj, cache, "PROJHOST_ON_ERROR=retry", "PROJHOST_MAX_ATTEMPTS=3")
	victim := aws.ToString(ls[0].ShardId)

	// Phase 1: the stream to its tip, shard 0's bootstrap killed mid-batch.
	var mu sync.Mutex
	var infos []esm.InvokeInfo
	var batches = map[string][][]types.Record{}
	calls := map[string]int{}
	killed := make(chan int, 1)
	cfg := driverConfig(t, kc, arn, invokers)
	cfg.BisectBatchOnFunctionError = true
	cfg.Hooks = esm.Hooks{
		Invoke: func(shardID string, recs []types.Record) {
			mu.Lock()
			defer mu.Unlock()
			calls[shardID]++
			batches[shardID] = append(batches[shardID], recs)
			if shardID == victim && calls[shardID] == 2 {
				go func() {
					time.Sleep(40 * time.Millisecond)
					pid, err := emus[victim].FunctionPid()
					if err == nil {
						err = syscall.Kill(pid, syscall.SIGKILL)
					}
					if err != nil {
						t.Errorf("kill the bootstrap: %v", err)
					}
					killed <- pid
				}()
			}
		},
		Invoked: func(i esm.InvokeInfo) { mu.Lock(); infos = append(infos, i); mu.Unlock() },
	}
	d, err := esm.New(cfg)
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, d.RunToTip(ctx))
	phase1 := time.Since(start)
	t.Logf("killed the bootstrap of %s (pid %d) during its second invocation", victim, <-killed)

	flightcheck.Check(t, fs, le.docs(t, proj))
	tips, byShard := streamTips(ctx, t, kc, stream)
	require.Equal(t, tips, d.Checkpoints(), "every shard checkpointed at its tip")
	var victimErrors int
	busy := map[string]time.Duration{}
	for _, i := range infos {
		busy[i.ShardID] += i.Duration
		if i.ShardID == victim && i.Outcome == esm.FuncError {
			victimErrors++
			t.Logf("the killed invocation: %s, %d records: status %d, %s: %s", i.Outcome, i.Records, i.StatusCode, i.FunctionError, i.Payload)
		} else {
			require.Equal(t, esm.Success, i.Outcome, "%+v", i)
		}
	}
	require.Equal(t, 1, victimErrors, "the killed invocation failed, and only it")
	for _, id := range esm.SortedShards(byShard) {
		n := len(byShard[id])
		t.Logf("%s: %d records in %d invocations, %v invoked: %.0f events/s while invoked, %.0f events/s over the run (%v)",
			id, n, calls[id], busy[id].Round(time.Millisecond), float64(n)/busy[id].Seconds(), float64(n)/phase1.Seconds(),
			phase1.Round(time.Millisecond))
	}

	// A batch delivered again changes nothing.
	before := le.docs(t, proj)
	other := aws.ToString(ls[1].ShardId)
	again, err := json.Marshal(esm.Event(arn, "us-east-1", other, batches[other][0]))
	require.NoError(t, err)
	for range 2 {
		res, err := emus[other].Invoke(ctx, other, again)
		require.NoError(t, err)
		require.Empty(t, res.FunctionError, "%s", res.Payload)
		require.JSONEq(t, `{"batchItemFailures":[]}`, string(res.Payload))
	}
	require.Equal(t, before, le.docs(t, proj))

	// Phase 2: a malformed flight, then 3 good ones of its key, under retry.
	bad := fs[7]
	good := []flightcheck.Flight{fs[11], fs[12], fs[13]}
	for i := range good {
		good[i].Origin = bad.Origin
	}
	phase1End := d.Checkpoints()
	put([]flightcheck.Flight{bad}, flightcheck.Flight.QuotedJSON)
	put(good, flightcheck.Flight.JSON)
	var failures []esm.FailureRecord
	infos = nil
	cfg.MaximumRetryAttempts = 1
	cfg.Checkpoints = phase1End
	cfg.Hooks.Invoke = nil
	cfg.OnFailure = func(fr esm.FailureRecord) { mu.Lock(); failures = append(failures, fr); mu.Unlock() }
	d, err = esm.New(cfg)
	require.NoError(t, err)
	require.NoError(t, d.RunToTip(ctx))
	require.Len(t, infos, 2, "an invocation and its retry: %+v", infos)
	sid := infos[0].ShardID
	_, byShard, err = kinesistest.ReadStream(ctx, kc, stream)
	require.NoError(t, err)
	tail := byShard[sid][len(byShard[sid])-4:]
	badSeq := tail[0].Seq
	require.Equal(t, bad.QuotedJSON(), tail[0].Data)
	for _, i := range infos {
		require.Equal(t, esm.Partial, i.Outcome)
		require.Equal(t, []string{badSeq}, i.Failures, "exactly the failing record's sequence number")
		require.Equal(t, 4, i.Records)
	}
	require.Len(t, failures, 1)
	b := failures[0].KinesisBatchInfo
	require.Equal(t, esm.KinesisBatchInfo{ShardID: sid, StartSequenceNumber: badSeq, EndSequenceNumber: tail[3].Seq,
		ApproximateArrivalOfFirstRecord: b.ApproximateArrivalOfFirstRecord, ApproximateArrivalOfLastRecord: b.ApproximateArrivalOfLastRecord,
		BatchSize: 4, StreamARN: arn}, b)
	require.Equal(t, esm.RetryAttemptsExhausted, failures[0].RequestContext.Condition)
	require.Equal(t, 2, failures[0].RequestContext.ApproximateInvokeCount)
	flightcheck.Check(t, fs, le.docs(t, proj))
	seqs, err := le.st.Cursors.Get(ctx, proj, sid)
	require.NoError(t, err)
	require.Equal(t, phase1End[sid], seqs.Seq, "nothing after the failing record committed")

	// Phase 3: the same records again, under dead-letter (a new function configuration: a new
	// emulator for the shard): the flight is dead-lettered with its data, the shard goes on.
	dl := le.emulator(t, sid+"-dead-letter", proj, cache, "PROJHOST_ON_ERROR=dead-letter", "PROJHOST_MAX_ATTEMPTS=2")
	invokers[sid] = dl
	infos, failures = nil, nil
	cfg.MaximumRetryAttempts = 3
	cfg.Checkpoints = phase1End
	d, err = esm.New(cfg)
	require.NoError(t, err)
	require.NoError(t, d.RunToTip(ctx))
	require.Empty(t, failures)
	require.Len(t, infos, 1)
	require.Equal(t, esm.Success, infos[0].Outcome)
	letters, err := le.st.DeadLetters.List(ctx, proj, deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, badSeq, letters[0].Seq)
	require.Equal(t, sid, letters[0].ShardID)
	require.Equal(t, bad.QuotedJSON(), letters[0].Data)
	require.Equal(t, bad.Origin, letters[0].PartitionKey)
	flightcheck.Check(t, append(append([]flightcheck.Flight(nil), fs...), good...), le.docs(t, proj))
	c, err := le.st.Cursors.Get(ctx, proj, sid)
	require.NoError(t, err)
	require.Equal(t, tail[3].Seq, c.Seq)
}

// TestColdStart (PROJHOST_LAMBDA_MEASURE=1; run without -race) measures a fresh execution
// environment's first invocation under the emulator — the bootstrap process started by the
// emulator, its init (the active version fetched from S3 and compiled), the invocation of an
// empty batch: the start-up cost alone — with an empty and with a warm compilation cache
// directory, for flightdelays in AssemblyScript and in Go; then two batches of 100 flights (their
// DynamoDB writes dominate on dynalite).
func TestColdStart(t *testing.T) {
	if os.Getenv("PROJHOST_LAMBDA_MEASURE") == "" {
		t.Skip("set PROJHOST_LAMBDA_MEASURE=1 to measure")
	}
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:200]
	le := newLambdaEnv(t)
	ctx := context.Background()
	arn := "arn:aws:kinesis:us-east-1:123456789012:stream/measure"
	event := func(shard string, fs []flightcheck.Flight) []byte {
		recs := make([]types.Record, len(fs))
		for i, f := range fs {
			recs[i] = types.Record{SequenceNumber: aws.String(fmt.Sprintf("4959%052d", i+1)), PartitionKey: aws.String(f.Origin),
				Data: f.JSON(), ApproximateArrivalTimestamp: aws.Time(time.Now())}
		}
		b, err := json.Marshal(esm.Event(arn, "us-east-1", shard, recs))
		require.NoError(t, err)
		return b
	}
	var lines []string
	for _, module := range []string{testwasm.FlightDelaysAS, testwasm.FlightDelaysGo} {
		proj := "measure-" + module
		le.deploy(t, proj, module)
		cache := t.TempDir()
		for i, what := range []string{"cold cache", "warm cache", "warm cache"} {
			e := le.emulator(t, fmt.Sprintf("%s-%d", module, i), proj, cache)
			timed := func(ev []byte) time.Duration {
				start := time.Now()
				res, err := e.Invoke(ctx, "", ev)
				took := time.Since(start)
				require.NoError(t, err)
				require.Empty(t, res.FunctionError, "%s", res.Payload)
				require.JSONEq(t, `{"batchItemFailures":[]}`, string(res.Payload))
				return took
			}
			empty := timed([]byte(`{"Records":[]}`))
			first := timed(event(fmt.Sprintf("shardId-%012d", i), fs[:100]))
			next := timed(event(fmt.Sprintf("shardId-%012d", i+10), fs[100:]))
			lines = append(lines, fmt.Sprintf("%s, %s: fresh bootstrap to its first response (process start, init: fetch + compile, an empty invocation) %v; "+
				"then a batch of 100 flights %v, and another %v", module, what, empty.Round(time.Millisecond),
				first.Round(time.Millisecond), next.Round(time.Millisecond)))
			e.Stop()
		}
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
}
