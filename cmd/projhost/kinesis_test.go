package main

// Process tests of the Kinesis verbs and `run`/`status --source kinesis` against kinesis-local
// (internal/kinesistest) with DynamoDB leases (internal/dynamotest).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store/dynamo"
)

// TestKinesisFlagsRefused: flag combinations that do not go together are refused before
// anything is opened or called, with one line saying what to do.
func TestKinesisFlagsRefused(t *testing.T) {
	run := []string{"run", "--name", "f", "--handler", "testdata/ctlbytes.wasm"}
	kin := []string{"--source", "kinesis", "--stream", "s", "--kinesis-endpoint", "http://127.0.0.1:1"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown source", cat(run, []string{"--source", "kafka"}), `unknown --source "kafka": use journal or kinesis`},
		{"stream without kinesis", cat(run, []string{"--stream", "s"}), "--stream needs --source kinesis"},
		{"endpoint without kinesis", []string{"status", "--kinesis-endpoint", "http://x"}, "--kinesis-endpoint needs --source kinesis"},
		{"initial position without kinesis", cat(run, []string{"--initial-position", "LATEST"}), "--initial-position needs --source kinesis"},
		{"kinesis without stream", cat(run, []string{"--source", "kinesis", "--data", t.TempDir()}), "--source kinesis needs --stream NAME or ARN"},
		{"bad initial position", cat(run, kin, []string{"--data", t.TempDir(), "--initial-position", "OLDEST"}), `--initial-position: kinesis: initial position "OLDEST": want TRIM_HORIZON, LATEST or AT_TIMESTAMP=`},
		{"bad timestamp", cat(run, kin, []string{"--data", t.TempDir(), "--initial-position", "AT_TIMESTAMP=2026-13-01"}), "want TRIM_HORIZON, LATEST or AT_TIMESTAMP="},
		{"embedded store without --data", cat(run, kin), "--source kinesis with --store sqlite needs --data DIR"},
		{"status: embedded store without --data", cat([]string{"status"}, kin), "--source kinesis with --store sqlite needs --data DIR"},
		{"negative shard sync", cat(run, kin, []string{"--data", t.TempDir(), "--shard-sync", "-1s"}), "shard-sync -1s is negative: give how often the shard list is read again, e.g. 10s (0: the default, 10s)"},
		{"dynamodb with --data", cat(run, kin, []string{"--store", "dynamodb", "--data", t.TempDir()}), "--data is not used with --source kinesis and --store dynamodb"},
		{"create: no shards", []string{"kinesis", "create", "--stream", "s", "--shards", "0"}, "--shards 0: use 1 to 10000"},
		{"create: an ARN", []string{"kinesis", "create", "--stream", "arn:aws:kinesis:us-east-1:1:stream/s"}, "create takes a stream name, not an ARN"},
		{"put: no stream", []string{"kinesis", "put", "-"}, "--stream is required"},
		{"merge: one shard", []string{"kinesis", "merge", "--stream", "s", "--shard", "a"}, "merge takes two different shards"},
		{"merge: the same shard twice", []string{"kinesis", "merge", "--stream", "s", "--shard", "a", "--shard", "a"}, "merge takes two different shards"},
		{"split: no shard", []string{"kinesis", "split", "--stream", "s"}, "--shard is required"},
		{"update-shard-count: no count", []string{"kinesis", "update-shard-count", "--stream", "s"}, "--shards 0: use 1 to 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, nil, binPath, tc.args...)
			require.Error(t, r.err)
			require.Equal(t, 1, r.err.(*exec.ExitError).ExitCode())
			msg := strings.TrimSpace(r.stderr)
			require.NotContains(t, msg, "\n", "one line")
			require.True(t, strings.HasPrefix(msg, "projhost: "), msg)
			require.Contains(t, msg, tc.want)
		})
	}
}

// TestKinesisTwoWorkersDynamo: `kinesis create` a 4-shard stream, `kinesis put` 1,200 flights
// (3 PutRecords calls), two `run --source kinesis --store dynamodb --until-caught-up` workers
// at once: both exit 0, the read model equals the independent computation, the traces show
// every record handled and the lag of every shard read (MillisBehindLatest 0 at the end), and
// `status` shows the 4 shards caught up with lag 0 ms.
func TestKinesisTwoWorkersDynamo(t *testing.T) {
	kep := kinesistest.Endpoint(t)
	dep := dynamotest.Endpoint(t)
	_, prefix := dynamotest.Tables(t)
	handler := testwasm.Path(t, testwasm.FlightDelaysAS)
	stream := "cli" + strings.TrimSuffix(prefix, "-")
	kc := kinesistest.Client(t)
	k := []string{"--kinesis-endpoint", kep}
	out := projhost(t, append([]string{"kinesis", "create", "--stream", stream, "--shards", "4"}, k...)...)
	require.Contains(t, out, "stream "+stream+" with 4 shards is ACTIVE: arn:aws:kinesis:")
	t.Cleanup(func() {
		kc.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream), EnforceConsumerDeletion: aws.Bool(true)})
	})

	// A held-out subset: flights-2k from its 700th record (other tests project its start).
	flights := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[700:1900]
	file := jsonLines(t, t.TempDir(), "flights.jsonl", flights)
	r := cli(t, nil, binPath, append([]string{"kinesis", "put", "--stream", stream + "-none", file}, k...)...)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "the input's first 0 records are stored")
	require.Contains(t, r.stderr, "create the stream: projhost kinesis create --stream NAME --shards N")
	require.NotContains(t, strings.TrimSpace(r.stderr), "\n")
	r = cli(t, nil, binPath, append([]string{"kinesis", "put", "--stream", stream, "--key-field", "origin", file}, k...)...)
	require.NoError(t, r.err, r.stderr)
	require.Regexp(t, `put 1200 records from .* to `+stream+` in .* \(\d+ records/s, 3 PutRecords calls, \d+ entries resent\)`, r.stderr)

	store := []string{"--store", "dynamodb", "--dynamodb-endpoint", dep, "--table-prefix", prefix}
	src := append([]string{"--source", "kinesis", "--stream", stream}, k...)
	dir := t.TempDir()
	traces := []string{filepath.Join(dir, "w1.trace"), filepath.Join(dir, "w2.trace")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	workers, stderrs := startWorkers(t, ctx, traces, append(append([]string{"--name", "f", "--handler", handler, "--until-caught-up",
		"--module-store", filepath.Join(dir, "modules")}, store...), src...)...)
	for i, w := range workers {
		require.NoError(t, w.Wait(), "worker %d:\n%s", i+1, stderrs[i])
	}
	flightcheck.Check(t, flights, dynamoDocs(t, dep, prefix, "f"))

	// The last lag traced of each shard, by either worker (a shard may change hands).
	handled, lastLag := 0, map[string]projection.TraceRecord{}
	for _, tr := range traces {
		for _, rec := range readTrace(t, tr) {
			switch rec.Event {
			case "batch":
				handled += rec.Events
			case "lag":
				require.NotNil(t, rec.MillisBehind, "lag record without millis_behind")
				if l, ok := lastLag[rec.Shard]; !ok || !rec.Time.Before(l.Time) {
					lastLag[rec.Shard] = rec
				}
			}
		}
	}
	require.GreaterOrEqual(t, handled, len(flights), "events handled (a shard handed over between the workers may be replayed from its cursor)")
	require.NotEmpty(t, lastLag)
	for sh, rec := range lastLag {
		require.Zero(t, *rec.MillisBehind, "last MillisBehind traced for %s", sh)
	}

	out = projhost(t, append(append([]string{"status", "--name", "f", "--json"}, store...), src...)...)
	var rows []shardStatus
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row shardStatus
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), sc.Text())
		rows = append(rows, row)
	}
	require.Len(t, rows, 4, out)
	for _, row := range rows {
		require.Empty(t, row.Problem, row.Shard)
		require.NotEmpty(t, row.Cursor, "%s: every shard of 1,200 flights by origin has records", row.Shard)
		require.NotNil(t, row.LagMillis, row.Shard)
		require.Zero(t, *row.LagMillis, row.Shard)
		require.False(t, *row.RecordsBehind, row.Shard)
		require.Equal(t, int64(-1), row.LagEvents, row.Shard)
	}
	table := projhost(t, append(append([]string{"status", "--name", "f"}, store...), src...)...)
	require.Contains(t, table, "LAG (ms)")
	require.Equal(t, 4, strings.Count(table, "caught up"), table)
}

// jsonLines writes flights to dir/name as JSON lines (the input of `kinesis put`) and returns
// its path.
func jsonLines(t *testing.T, dir, name string, flights []flightcheck.Flight) string {
	t.Helper()
	var lines bytes.Buffer
	for _, f := range flights {
		lines.Write(f.JSON())
		lines.WriteByte('\n')
	}
	file := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(file, lines.Bytes(), 0o644))
	return file
}

// startWorkers starts one `projhost run --trace TRACE --worker-id wN ARGS...` per trace file
// (w1, w2, ...), killed when ctx ends, and returns them with their stderr.
func startWorkers(t *testing.T, ctx context.Context, traces []string, args ...string) ([]*exec.Cmd, []*bytes.Buffer) {
	t.Helper()
	var workers []*exec.Cmd
	var stderrs []*bytes.Buffer
	for i, tr := range traces {
		w := exec.CommandContext(ctx, binPath, append([]string{"run", "--trace", tr, "--worker-id", fmt.Sprintf("w%d", i+1)}, args...)...)
		var stderr bytes.Buffer
		w.Stderr = &stderr
		require.NoError(t, w.Start())
		workers, stderrs = append(workers, w), append(stderrs, &stderr)
	}
	return workers, stderrs
}

// dynamoDocs returns the flightdelays read model of projection name (airports and routes) from
// the DynamoDB tables of prefix at endpoint dep.
func dynamoDocs(t *testing.T, dep, prefix, name string) []readmodel.Doc {
	t.Helper()
	st, err := dynamo.Open(context.Background(), dynamo.Config{Endpoint: dep, Prefix: prefix})
	require.NoError(t, err)
	defer (&stores{st}).Close()
	var docs []readmodel.Doc
	for _, c := range []string{"airports", "routes"} {
		d, err := st.ReadModel.Scan(context.Background(), name, c)
		require.NoError(t, err)
		docs = append(docs, d...)
	}
	return docs
}

// mergedTraces reads the `run --trace` files of paths that exist so far, in time order.
func mergedTraces(t *testing.T, paths []string) []projection.TraceRecord {
	t.Helper()
	var out []projection.TraceRecord
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, readTrace(t, p)...)
		}
	}
	slices.SortStableFunc(out, func(a, b projection.TraceRecord) int { return a.Time.Compare(b.Time) })
	return out
}

// readTrace reads a `run --trace` file.
func readTrace(t *testing.T, path string) []projection.TraceRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []projection.TraceRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r projection.TraceRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		out = append(out, r)
	}
	return out
}
