package lambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/s3test"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/registry/s3blobs"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/dynamo"
)

func TestMain(m *testing.M) { os.Exit(s3test.RunFunc(func() int { return dynamotest.Run(m) })) }

const proj = "flights"

var quiet = testLogger()

func testLogger() *slog.Logger {
	if os.Getenv("LAMBDA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// env is a projection's DynamoDB tables and S3 module store, with a version of a module
// deployed and active.
type env struct {
	st    *store.Stores
	blobs *s3blobs.Blobs
}

// newEnv makes fresh tables and a bucket, and deploys and activates the testwasm module
// ("": none).
func newEnv(t *testing.T, module string) *env {
	t.Helper()
	ctx := context.Background()
	_, prefix := dynamotest.Tables(t)
	st, err := dynamo.Open(ctx, dynamo.Config{Endpoint: dynamotest.Endpoint(t), Prefix: prefix})
	require.NoError(t, err)
	c := s3test.Client(t)
	blobs, err := s3blobs.Open(ctx, c, s3test.Bucket(t, c), "modules/")
	require.NoError(t, err)
	e := &env{st: st, blobs: blobs}
	if module != "" {
		e.deploy(t, module)
	}
	return e
}

// deploy deploys the testwasm module and activates it.
func (e *env) deploy(t *testing.T, module string) {
	t.Helper()
	ctx := context.Background()
	d, err := deploy.New(deploy.Config{Registry: e.st.Registry, Blobs: e.blobs, Runtime: runtime(t, t.TempDir()), SmokeEvents: -1})
	require.NoError(t, err)
	wasm, err := os.ReadFile(testwasm.Path(t, module))
	require.NoError(t, err)
	r, err := d.Deploy(ctx, proj, wasm, deploy.Options{Activate: true})
	require.NoError(t, err)
	require.True(t, r.Activated)
}

// runtime is a runtime with its compilation cache in dir (a container's /tmp).
func runtime(t *testing.T, dir string) *host.Runtime {
	t.Helper()
	rt, err := host.NewRuntime(context.Background(), host.WithCacheDir(dir), host.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// handler is a new Handler (a new container: its own runtime) on e.
func (e *env) handler(t *testing.T, mut func(*lambda.Config)) *lambda.Handler {
	t.Helper()
	cfg := lambda.Config{Core: projection.Config{Projection: proj, Stores: e.st, Logger: quiet, RetryMin: time.Millisecond},
		Blobs: e.blobs, Runtime: runtime(t, t.TempDir())}
	if mut != nil {
		mut(&cfg)
	}
	h, err := lambda.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// docs is the projection's read model.
func (e *env) docs(t *testing.T) []readmodel.Doc {
	t.Helper()
	ds, err := e.st.ReadModel.Scan(context.Background(), proj, "")
	require.NoError(t, err)
	return ds
}

func (e *env) cursorOf(t *testing.T, shardID string) (seq string, epoch int64) {
	t.Helper()
	c, err := e.st.Cursors.Get(context.Background(), proj, shardID)
	require.NoError(t, err)
	return c.Seq, c.Epoch
}

// shardID is the Kinesis shard id of shard n.
func shardID(n int) string { return fmt.Sprintf("shardId-%012d", n) }

// seqOf is the sequence number of a shard's record i: 56 digits, like Kinesis'.
func seqOf(i int) string { return fmt.Sprintf("4959%052d", i+1) }

var arrival = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// record is a Kinesis record as the ESM delivers it.
func record(shard string, i int, pk string, data []byte) events.KinesisEventRecord {
	return events.KinesisEventRecord{
		EventID: shard + ":" + seqOf(i), EventName: "aws:kinesis:record", EventSource: "aws:kinesis", EventVersion: "1.0",
		AwsRegion: "us-east-1", EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/flights",
		Kinesis: events.KinesisRecord{KinesisSchemaVersion: "1.0", PartitionKey: pk, SequenceNumber: seqOf(i), Data: data,
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: arrival.Add(time.Duration(i) * time.Millisecond)}},
	}
}

// flightRecords are flights as one shard's records 0..n-1; the indexes in quoted get the
// malformed form the strict flightdelays handlers fail on.
func flightRecords(shard string, fs []flightcheck.Flight, quoted ...int) []events.KinesisEventRecord {
	bad := map[int]bool{}
	for _, i := range quoted {
		bad[i] = true
	}
	out := make([]events.KinesisEventRecord, len(fs))
	for i, f := range fs {
		d := f.JSON()
		if bad[i] {
			d = f.QuotedJSON()
		}
		out[i] = record(shard, i, f.Origin, d)
	}
	return out
}

// invoke runs one invocation of records with a Lambda-like deadline and returns the
// response's failures.
func invoke(t *testing.T, h *lambda.Handler, recs []events.KinesisEventRecord) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Through JSON, as the runtime delivers it.
	b, err := json.Marshal(events.KinesisEvent{Records: recs})
	require.NoError(t, err)
	var in events.KinesisEvent
	require.NoError(t, json.Unmarshal(b, &in))
	resp, err := h.Handle(ctx, in)
	require.NoError(t, err)
	out, err := json.Marshal(resp)
	require.NoError(t, err)
	var back struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	require.NoError(t, json.Unmarshal(out, &back))
	require.NotNil(t, back.BatchItemFailures, "the response holds a list: %s", out)
	var ids []string
	for _, f := range back.BatchItemFailures {
		require.NotEmpty(t, f.ItemIdentifier, "an empty identifier fails the whole batch")
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// TestSampleEvent: aws-lambda-go's own sample Kinesis event (events/testdata/kinesis-event.json
// of the module, read from the module cache) decodes, and runs through count.
func TestSampleEvent(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "kinesis-event.json"))
	require.NoError(t, err)
	var in events.KinesisEvent
	require.NoError(t, json.Unmarshal(b, &in))
	sid, evs, err := lambda.Records(in)
	require.NoError(t, err)
	require.Equal(t, "shardId-000000000000", sid)
	require.Len(t, evs, 2)
	require.Equal(t, "49568167373333333333333333333333333333333333333333333333", evs[0].Seq)
	require.Equal(t, "s1", evs[0].PartitionKey)
	require.Equal(t, "Hello World", string(evs[0].Data))
	require.Equal(t, int64(1480641523477), evs[0].ArrivalMs)
	require.Equal(t, int64(1480841523477), evs[1].ArrivalMs)

	e := newEnv(t, testwasm.CountAS)
	h := e.handler(t, nil)
	resp, err := h.Handle(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Equal(t, []readmodel.Doc{{Collection: "counts", Key: "s1", Doc: []byte(`{"count":2}`)}}, e.docs(t))
	seq, epoch := e.cursorOf(t, sid)
	require.Equal(t, evs[1].Seq, seq)
	require.Equal(t, int64(1), epoch)
}

// TestRecordsBad: inputs that are not one shard's records in order are refused whole.
func TestRecordsBad(t *testing.T) {
	a, b := shardID(0), shardID(1)
	rec := func(shard string, i int) events.KinesisEventRecord { return record(shard, i, "k", []byte("{}")) }
	for _, c := range []struct {
		name string
		recs []events.KinesisEventRecord
		want string
	}{
		{"two shards", []events.KinesisEventRecord{rec(a, 0), rec(a, 1), rec(b, 2)},
			"records of two shards in one invocation: shardId-000000000000 (record 0) and shardId-000000000001 (record 2)"},
		{"no shard id", []events.KinesisEventRecord{{EventID: seqOf(0), Kinesis: events.KinesisRecord{SequenceNumber: seqOf(0)}}},
			"is not <shard id>:<sequence number>"},
		{"bad sequence number", []events.KinesisEventRecord{{EventID: a + ":x", Kinesis: events.KinesisRecord{SequenceNumber: "x"}}},
			`sequence number "x" is not a decimal number`},
		{"shard id with a space", []events.KinesisEventRecord{{EventID: "shard 0:" + seqOf(0), Kinesis: events.KinesisRecord{SequenceNumber: seqOf(0)}}},
			"is not <shard id>:<sequence number>"},
		{"shard id over 128", []events.KinesisEventRecord{{EventID: strings.Repeat("s", 129) + ":" + seqOf(0), Kinesis: events.KinesisRecord{SequenceNumber: seqOf(0)}}},
			"is not <shard id>:<sequence number>"},
		{"eventID of another record", []events.KinesisEventRecord{{EventID: a + ":" + seqOf(1), Kinesis: events.KinesisRecord{SequenceNumber: seqOf(0)}}},
			"names another sequence number than kinesis.sequenceNumber " + seqOf(0)},
		{"out of order", []events.KinesisEventRecord{rec(a, 1), rec(a, 0)}, "does not follow"},
		{"repeated", []events.KinesisEventRecord{rec(a, 1), rec(a, 1)}, "does not follow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := lambda.Records(events.KinesisEvent{Records: c.recs})
			require.ErrorIs(t, err, lambda.ErrBadEvent)
			require.ErrorContains(t, err, c.want)
		})
	}
	// Through Handle: a function error, nothing done.
	e := newEnv(t, testwasm.CountAS)
	h := e.handler(t, nil)
	_, err := h.Handle(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{rec(a, 0), rec(b, 1)}})
	require.ErrorIs(t, err, lambda.ErrBadEvent)
	require.Empty(t, e.docs(t))
	resp, err := h.Handle(context.Background(), events.KinesisEvent{})
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures)
	require.Empty(t, resp.BatchItemFailures)
}

// shardOf spreads partition keys over n shards (any fixed rule will do: a key's events stay in
// one shard, in order).
func shardOf(pk string, n int) int { return int(crc32.ChecksumIEEE([]byte(pk)) % uint32(n)) }

// TestFlights: flights-2k as the records of 4 shards, delivered in overlapping batches (each
// batch repeating the last 30 records of the one before) by one Handler for all shards,
// concurrently across shards, gives the exact flightdelays read model; every record is handled
// once. A batch delivered again changes nothing.
func TestFlights(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	const shards, batch, overlap = 4, 100, 30
	per := make([][]events.KinesisEventRecord, shards)
	{
		split := make([][]flightcheck.Flight, shards)
		for _, f := range fs {
			n := shardOf(f.Origin, shards)
			split[n] = append(split[n], f)
		}
		for n := range split {
			per[n] = flightRecords(shardID(n), split[n])
		}
	}
	e := newEnv(t, testwasm.FlightDelaysAS)
	var mu sync.Mutex
	handled := 0
	h := e.handler(t, func(c *lambda.Config) {
		c.Core.Hooks.Batch = func(b projection.BatchInfo) { mu.Lock(); handled += b.Events; mu.Unlock() }
	})
	require.NoError(t, h.Warm(context.Background()))
	var wg sync.WaitGroup
	for n := range shards {
		wg.Go(func() {
			recs := per[n]
			for from := 0; from < len(recs); from += batch {
				require.Empty(t, invoke(t, h, recs[max(from-overlap, 0):min(from+batch, len(recs))]))
			}
		})
	}
	wg.Wait()
	flightcheck.Check(t, fs, e.docs(t))
	require.Equal(t, len(fs), handled, "every record handled once")
	for n := range shards {
		seq, epoch := e.cursorOf(t, shardID(n))
		require.Equal(t, seqOf(len(per[n])-1), seq)
		require.Equal(t, int64((len(per[n])+batch-1)/batch), epoch, "one epoch per invocation")
	}

	before := e.docs(t)
	require.Empty(t, invoke(t, h, per[1][:batch]))
	require.Empty(t, invoke(t, h, per[1][:batch]))
	require.Equal(t, before, e.docs(t))
	require.Equal(t, len(fs), handled, "a batch delivered again is not handled")
}

// TestFailingRecord: one record (#123 of 300) always fails. Under stop and retry the response
// names exactly it and the records before it are committed; the ESM's retry from it fails the
// same way. Under dead-letter the invocation succeeds, the letter holds the record's data, and
// the shard goes on; after a fixed handler is activated and a replay requested, the shard's next
// invocation replays the letter.
func TestFailingRecord(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:300]
	sid := shardID(3)
	const bad = 123
	recs := flightRecords(sid, fs, bad)
	without := append(append([]flightcheck.Flight(nil), fs[:bad]...), fs[bad+1:]...)
	for _, pol := range []projection.OnError{projection.Stop, projection.Retry, projection.DeadLetter} {
		t.Run(string(pol), func(t *testing.T) {
			e := newEnv(t, testwasm.FlightDelaysAS)
			var mu sync.Mutex
			var errs []projection.HandlerErrorInfo
			h := e.handler(t, func(c *lambda.Config) {
				c.Core.Policy = projection.Policy{OnError: pol, MaxAttempts: 2}
				c.Core.Hooks.HandlerError = func(i projection.HandlerErrorInfo) { mu.Lock(); errs = append(errs, i); mu.Unlock() }
				c.ReplayCheck = time.Nanosecond
			})
			got := invoke(t, h, recs[:200])
			ctx := context.Background()
			if pol == projection.DeadLetter {
				require.Empty(t, got)
				seq, _ := e.cursorOf(t, sid)
				require.Equal(t, seqOf(199), seq)
				ls, err := e.st.DeadLetters.List(ctx, proj, deadletter.Filter{})
				require.NoError(t, err)
				require.Len(t, ls, 1)
				l := ls[0]
				require.Equal(t, sid, l.ShardID)
				require.Equal(t, seqOf(bad), l.Seq)
				require.Equal(t, fs[bad].QuotedJSON(), l.Data)
				require.Equal(t, fs[bad].Origin, l.PartitionKey)
				require.Equal(t, arrival.Add(bad*time.Millisecond).UnixMilli(), l.ArrivalMs)
				require.Equal(t, deadletter.StateFailed, l.State)
				require.Contains(t, l.Error, `"delay"`)
				require.Empty(t, invoke(t, h, recs[150:250]), "the shard goes on")
				flightcheck.Check(t, without[:249], e.docs(t))

				// A handler that takes the malformed flight, and a replay request: the next
				// invocation of the shard replays the letter before its batch.
				e.deploy(t, testwasm.FlightDelaysGoLenient)
				require.NoError(t, e.st.DeadLetters.Transition(ctx, proj, sid, seqOf(bad),
					[]deadletter.State{deadletter.StateFailed}, deadletter.StateReplayRequested, ""))
				require.Empty(t, invoke(t, h, recs[250:]))
				l, err = e.st.DeadLetters.Get(ctx, proj, sid, seqOf(bad))
				require.NoError(t, err)
				require.Equal(t, deadletter.StateReplayed, l.State)
				flightcheck.Check(t, fs, e.docs(t))
				return
			}
			require.Equal(t, []string{seqOf(bad)}, got)
			seq, _ := e.cursorOf(t, sid)
			require.Equal(t, seqOf(bad-1), seq, "the records before it are committed")
			flightcheck.Check(t, fs[:bad], e.docs(t))
			mu.Lock()
			require.Len(t, errs, 2+3, "2 attempts, then the bisection's failing probes (100..149, 100..124, 123 alone)")
			mu.Unlock()

			// The ESM retries from the failing record.
			require.Equal(t, []string{seqOf(bad)}, invoke(t, h, recs[bad:]))
			c, err := e.st.Cursors.Get(ctx, proj, sid)
			require.NoError(t, err)
			if pol == projection.Stop {
				require.Contains(t, c.Stopped, "at seq "+seqOf(bad))
			} else {
				require.Empty(t, c.Stopped, "retry stops nothing")
			}
			flightcheck.Check(t, fs[:bad], e.docs(t))
		})
	}
}

// TestEpochs: each invocation claims the shard at the stored epoch + 1, so a new Handler (a new
// container) continues from the cursor, and an older invocation still running when a newer one
// takes the shard (one that timed out, say) is fenced out: its writes change nothing, and its
// response names its first record.
func TestEpochs(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:300]
	sid := shardID(0)
	recs := flightRecords(sid, fs)
	e := newEnv(t, testwasm.FlightDelaysAS)
	h1 := e.handler(t, nil)
	require.Empty(t, invoke(t, h1, recs[:100]))
	require.Empty(t, invoke(t, e.handler(t, nil), recs[50:200]), "a new container continues from the cursor")
	seq, epoch := e.cursorOf(t, sid)
	require.Equal(t, seqOf(199), seq)
	require.Equal(t, int64(2), epoch)

	// An old invocation (epoch 3) is held after handling its batch, before committing it; a
	// newer one (epoch 4) handles the same batch meanwhile.
	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	old := e.handler(t, func(c *lambda.Config) {
		c.Core.Hooks.Batch = func(projection.BatchInfo) { once.Do(func() { close(held); <-hold }) }
	})
	var oldResp []string
	done := make(chan struct{})
	go func() { defer close(done); oldResp = invoke(t, old, recs[200:]) }()
	<-held
	require.Empty(t, invoke(t, e.handler(t, nil), recs[200:]))
	close(hold)
	<-done
	require.Equal(t, []string{seqOf(200)}, oldResp, "the fenced invocation committed nothing")
	seq, epoch = e.cursorOf(t, sid)
	require.Equal(t, seqOf(299), seq)
	require.Equal(t, int64(4), epoch)
	flightcheck.Check(t, fs, e.docs(t))
}

// TestActiveVersion: without an active version every record is reported failed (the ESM
// retries); once one is deployed the next invocation runs it; a version activated between
// invocations is run by the next one.
func TestActiveVersion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "")
	st := e.st
	h := e.handler(t, nil)
	require.ErrorIs(t, h.Warm(ctx), deploy.ErrNoActive)
	sid := shardID(0)
	rec := func(i int) events.KinesisEventRecord { return record(sid, i, "k", []byte(`{}`)) }
	require.Equal(t, []string{seqOf(0)}, invoke(t, h, []events.KinesisEventRecord{rec(0), rec(1)}))

	e.deploy(t, testwasm.CountAS)
	require.Empty(t, invoke(t, h, []events.KinesisEventRecord{rec(0), rec(1)}))
	require.Equal(t, int64(1), h.Version().Number)
	e.deploy(t, testwasm.CountAS) // the same bytes as a new version: a switch all the same
	require.Empty(t, invoke(t, h, []events.KinesisEventRecord{rec(2)}))
	require.Equal(t, int64(2), h.Version().Number)
	require.Equal(t, []readmodel.Doc{{Collection: "counts", Key: "k", Doc: []byte(`{"count":3}`)}}, e.docs(t))
	rs, err := st.Registry.Shards(ctx, proj)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, int64(2), rs[0].Version)
	require.Equal(t, seqOf(1), rs[0].Seq, "the switch point")
}

// deployWAT assembles the module of a .wat file of the repository, then deploys and activates
// it.
func (e *env) deployWAT(t *testing.T, rel string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(testwasm.RepoRoot(t), rel)
	if err := testwasm.AssembleWAT(t, dir, src); err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(filepath.Base(rel), ".wat")+".wasm"))
	require.NoError(t, err)
	d, err := deploy.New(deploy.Config{Registry: e.st.Registry, Blobs: e.blobs, Runtime: runtime(t, t.TempDir()), SmokeEvents: -1})
	require.NoError(t, err)
	r, err := d.Deploy(context.Background(), proj, wasm, deploy.Options{Activate: true})
	require.NoError(t, err)
	require.True(t, r.Activated)
}

// TestLoopingRecordWithinTimeout: a handler that loops on two records of a 256-record batch,
// under dead-letter, with invocations whose time (2 s) is far shorter than a failing call of
// the whole batch takes to settle (3 attempts and 9 bisection calls of 200 ms). Each invocation
// handles the records in chunks whose failure fits its time left, so each one commits records
// or dead-letters one; the event source mapping's retries from the record each response names
// reach the end, with both looping records in the dead-letter table and every other one in
// the read model. Handing the whole batch to the core at once, every invocation would run out
// of time bisecting toward record 0 and commit nothing.
func TestLoopingRecordWithinTimeout(t *testing.T) {
	e := newEnv(t, "")
	e.deployWAT(t, "internal/e2esuite/testdata/hostile.wat")
	var mu sync.Mutex
	var letters []deadletter.Letter
	h := e.handler(t, func(c *lambda.Config) {
		c.Core.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 3}
		c.Core.Hooks.DeadLettered = func(l deadletter.Letter) { mu.Lock(); letters = append(letters, l); mu.Unlock() }
		c.BatchDeadline = 200 * time.Millisecond
		c.Reserve = 300 * time.Millisecond
	})
	const timeout = 2 * time.Second
	cfg := lambda.Config{Core: projection.Config{Policy: projection.Policy{MaxAttempts: 3}, RetryMin: time.Millisecond},
		BatchDeadline: 200 * time.Millisecond, Reserve: 300 * time.Millisecond}
	require.Less(t, cfg.MinTimeout(), timeout, "an invocation has time for one looping record")
	require.Greater(t, cfg.Core.FailureTime(256, 200*time.Millisecond), timeout-cfg.Reserve, "but not for the whole batch")

	sid := shardID(2)
	loops := map[int]bool{0: true, 100: true}
	recs := make([]events.KinesisEventRecord, 256)
	for i := range recs {
		d := fmt.Sprintf(`{"k":"a","i":%d}`, i)
		if loops[i] {
			d = fmt.Sprintf(`{"hostile":"loop","k":"h","i":%d}`, i)
		}
		recs[i] = record(sid, i, "p", []byte(d))
	}
	from, invocations := 0, 0
	for from < len(recs) {
		invocations++
		require.LessOrEqual(t, invocations, 40, "the retries reach the end of the batch")
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		resp, err := h.Handle(ctx, events.KinesisEvent{Records: recs[from:]})
		cancel()
		require.NoError(t, err)
		if len(resp.BatchItemFailures) == 0 {
			break
		}
		require.Len(t, resp.BatchItemFailures, 1)
		next := -1
		for i := from; i < len(recs); i++ {
			if recs[i].Kinesis.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
				next = i
			}
		}
		require.Greater(t, next, from, "invocation %d (from record %d) made progress", invocations, from)
		from = next
	}
	t.Logf("%d invocations of at most %v", invocations, timeout)
	seq, _ := e.cursorOf(t, sid)
	require.Equal(t, seqOf(255), seq)
	ls, err := e.st.DeadLetters.List(context.Background(), proj, deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, ls, 2)
	for i, n := range []int{0, 100} {
		require.Equal(t, seqOf(n), ls[i].Seq)
		require.Equal(t, recs[n].Kinesis.Data, ls[i].Data)
		require.Equal(t, projection.KindDeadline, ls[i].ErrorKind)
	}
	mu.Lock()
	require.Len(t, letters, 2)
	mu.Unlock()
	docs := e.docs(t)
	require.Len(t, docs, 254)
	got := map[string]string{}
	for _, d := range docs {
		got[d.Collection+"/"+d.Key] = string(d.Doc)
	}
	for i, r := range recs {
		k := "events/" + sid + "/" + seqOf(i)
		if loops[i] {
			require.NotContains(t, got, k)
			continue
		}
		require.JSONEq(t, string(r.Kinesis.Data), got[k], k)
	}
}
