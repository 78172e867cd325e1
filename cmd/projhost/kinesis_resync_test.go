package main

// Process test of the shard re-sync of `run --source kinesis` after `kinesis update-shard-count`
// (issue 10: every open shard processing within one re-sync interval).

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/reshardcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
	"github.com/projhost/projhost/store/dynamo"
)

// TestKinesisUpdateShardCountDynamo: two `run --source kinesis --store dynamodb` workers with
// the default --shard-sync (container.DefaultShardSync) project 800 flights from a 2-shard
// kinesis-local stream; `kinesis update-shard-count --shards 4` runs under them and 600 more
// flights are put. Every open shard (the children) has its first traced batch within one
// re-sync interval of the update returning, after the lease of each of its parents was
// finished; the read model equals the independent computation, and for every origin airport
// every event of a parent shard was applied before any of its children's (from the traces:
// reshardcheck). Logs the time from the update to each child's first batch.
func TestKinesisUpdateShardCountDynamo(t *testing.T) {
	kep := kinesistest.Endpoint(t)
	dep := dynamotest.Endpoint(t)
	_, prefix := dynamotest.Tables(t)
	handler := testwasm.Path(t, testwasm.FlightDelaysAS)
	stream := "usc" + strings.TrimSuffix(prefix, "-")
	kc := kinesistest.Client(t)
	k := []string{"--stream", stream, "--kinesis-endpoint", kep}
	projhost(t, append([]string{"kinesis", "create", "--shards", "2"}, k...)...)
	t.Cleanup(func() {
		kc.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream), EnforceConsumerDeletion: aws.Bool(true)})
	})
	// flights-2k from its 200th record (others tests project its start), in two parts.
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[200:1600]
	before, after := fs[:800], fs[800:]
	dir := t.TempDir()
	put := func(name string, part []flightcheck.Flight) {
		t.Helper()
		var lines bytes.Buffer
		for _, f := range part {
			lines.Write(f.JSON())
			lines.WriteByte('\n')
		}
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, lines.Bytes(), 0o644))
		r := cli(t, nil, binPath, append([]string{"kinesis", "put", "--key-field", "origin", file}, k...)...)
		require.NoError(t, r.err, r.stderr)
		require.Contains(t, r.stderr, " 0 entries resent", "a resent record lands after later ones of its key")
	}
	put("before.jsonl", before)

	store := []string{"--store", "dynamodb", "--dynamodb-endpoint", dep, "--table-prefix", prefix}
	src := []string{"--source", "kinesis", "--stream", stream, "--kinesis-endpoint", kep}
	traces := []string{filepath.Join(dir, "w1.trace"), filepath.Join(dir, "w2.trace")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var workers []*exec.Cmd
	var stderrs []*bytes.Buffer
	for i, tr := range traces {
		args := append(append([]string{"run", "--name", "f", "--handler", handler, "--trace", tr,
			"--worker-id", []string{"w1", "w2"}[i]}, store...), src...)
		w := exec.CommandContext(ctx, binPath, args...)
		var stderr bytes.Buffer
		w.Stderr = &stderr
		require.NoError(t, w.Start())
		workers, stderrs = append(workers, w), append(stderrs, &stderr)
	}
	stopped := false
	defer func() {
		if !stopped {
			for _, w := range workers {
				w.Process.Kill()
				w.Wait()
			}
		}
	}()
	merged := func() []projection.TraceRecord {
		var out []projection.TraceRecord
		for _, tr := range traces {
			if _, err := os.Stat(tr); err == nil {
				out = append(out, readTrace(t, tr)...)
			}
		}
		slices.SortStableFunc(out, func(a, b projection.TraceRecord) int { return a.Time.Compare(b.Time) })
		return out
	}
	handled := func() int {
		n := 0
		for _, r := range merged() {
			if r.Event == "batch" {
				n += r.Events
			}
		}
		return n
	}
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v\nw1:\n%s\nw2:\n%s", what, d, stderrs[0], stderrs[1])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the 800 flights put before the update handled", time.Minute, func() bool { return handled() >= len(before) })

	out := projhost(t, append([]string{"kinesis", "update-shard-count", "--shards", "4"}, k...)...)
	updated := time.Now()
	require.Contains(t, out, "shard count updated to 4")
	put("after.jsonl", after)
	putDone := time.Since(updated)

	// The stream as a plain reader sees it: every shard read to its end (parents) or tip
	// (children), for the lineage and the sequence numbers' keys.
	ss, keys, last := readStream(t, kc, stream)
	var parents, children []string
	for _, s := range ss {
		if s.Closed {
			parents = append(parents, s.ID)
		} else {
			children = append(children, s.ID)
		}
	}
	require.Len(t, parents, 2, "%+v", ss)
	require.Len(t, children, 4, "%+v", ss)
	waitFor("every shard read to its last record", 2*time.Minute, func() bool {
		done := map[string]bool{}
		for _, r := range merged() {
			if r.Event == "batch" && r.LastSeq == last[r.Shard] {
				done[r.Shard] = true
			}
		}
		return len(done) == len(last)
	})
	for i, w := range workers {
		require.NoError(t, w.Process.Signal(syscall.SIGTERM))
		require.NoError(t, w.Wait(), "worker %d:\n%s", i+1, stderrs[i])
	}
	stopped = true

	st, err := dynamo.Open(context.Background(), dynamo.Config{Endpoint: dep, Prefix: prefix})
	require.NoError(t, err)
	defer (&stores{st}).Close()
	var docs []readmodel.Doc
	for _, c := range []string{"airports", "routes"} {
		d, err := st.ReadModel.Scan(context.Background(), "f", c)
		require.NoError(t, err)
		docs = append(docs, d...)
	}
	flightcheck.Check(t, fs, docs)

	recs := merged()
	checkTracedLineage(t, ss, keys, recs)
	bound := container.DefaultShardSync // the requirement: one re-sync interval
	finished := map[string]time.Time{}
	for _, r := range recs {
		if r.Event == "lease" && r.Kind == string(projection.LeaseFinished) {
			finished[r.Shard] = r.Time
		}
	}
	t.Logf("update-shard-count 2 -> 4 under two workers, --shard-sync %v (the default); the put of %d flights after it took %v",
		bound, len(after), putDone.Round(time.Millisecond))
	for _, p := range parents {
		t.Logf("parent %s finished %v after the update returned", p, finished[p].Sub(updated).Round(time.Millisecond))
	}
	for _, c := range children {
		i := slices.IndexFunc(recs, func(r projection.TraceRecord) bool { return r.Event == "batch" && r.Shard == c })
		require.GreaterOrEqual(t, i, 0, "child %s has no batch", c)
		first := recs[i].Time.Sub(updated)
		var ps []string
		for _, s := range ss {
			if s.ID == c {
				ps = s.ParentIDs
			}
		}
		t.Logf("child %s (of %v): first batch %v after the update returned", c, ps, first.Round(time.Millisecond))
		require.LessOrEqual(t, first, bound, "child %s processing later than one re-sync interval (%v) after the update", c, bound)
	}
}

// seqKey is a record's sequence number and partition key.
type seqKey struct{ seq, key string }

// readStream reads every shard of stream with a plain source from TRIM_HORIZON: closed shards to
// their end, open ones to their tip (an empty answer at MillisBehindLatest 0). It returns the
// shards (parents first), each shard's records and each shard's last sequence number.
func readStream(t *testing.T, c *kinesis.Client, stream string) ([]source.Shard, map[string][]seqKey, map[string]string) {
	t.Helper()
	ctx := context.Background()
	src, err := kinesissrc.New(c, stream, kinesissrc.WithIdleTime(50*time.Millisecond))
	require.NoError(t, err)
	ss, err := src.Shards(ctx)
	require.NoError(t, err)
	keys, last := map[string][]seqKey{}, map[string]string{}
	for _, s := range ss {
		r, err := src.Open(ctx, s.ID, "")
		require.NoError(t, err)
		for i := 0; ; i++ {
			require.Less(t, i, 1000, "shard %s: no end after %d reads", s.ID, i)
			b, err := r.Read(ctx, kinesissrc.MaxRead, time.Second)
			if errors.Is(err, source.ErrShardEnded) {
				break
			}
			require.NoError(t, err)
			for _, e := range b.Events {
				keys[s.ID] = append(keys[s.ID], seqKey{e.Seq, e.PartitionKey})
				last[s.ID] = e.Seq
			}
			if !s.Closed && len(b.Events) == 0 && b.MillisBehind == 0 {
				break
			}
		}
		r.Close()
	}
	return ss, keys, last
}

// checkTracedLineage checks, from trace records in time order (the workers run on one machine),
// that every closed shard was finished and no shard had a batch before each of its parents was
// finished (reshardcheck.Order), and that for every partition key no event of a shard was
// applied after one of its descendants' (reshardcheck.CheckKeys; a batch's events are the
// shard's records from its first to its last sequence number).
func checkTracedLineage(t *testing.T, ss []source.Shard, keys map[string][]seqKey, recs []projection.TraceRecord) {
	t.Helper()
	ord := reshardcheck.New()
	hooks := ord.Hooks()
	var applied []reshardcheck.Applied
	for _, r := range recs {
		si := projection.ShardInfo{Projection: r.Projection, ShardID: r.Shard, Epoch: r.Epoch}
		switch {
		case r.Event == "batch":
			hooks.Batch(projection.BatchInfo{ShardInfo: si, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Events: r.Events})
			ks := keys[r.Shard]
			i := slices.IndexFunc(ks, func(k seqKey) bool { return k.seq == r.FirstSeq })
			require.GreaterOrEqual(t, i, 0, "a batch of %s starts at %s, which the shard does not hold", r.Shard, r.FirstSeq)
			require.LessOrEqual(t, i+r.Events, len(ks), "a batch of %s from %s runs past the shard's records", r.Shard, r.FirstSeq)
			require.Equal(t, r.LastSeq, ks[i+r.Events-1].seq, "the batch of %d events of %s from %s", r.Events, r.Shard, r.FirstSeq)
			for _, k := range ks[i : i+r.Events] {
				applied = append(applied, reshardcheck.Applied{Key: k.key, Shard: r.Shard})
			}
		case r.Event == "lease" && r.Kind == string(projection.LeaseFinished):
			hooks.Lease(projection.LeaseInfo{ShardInfo: si, Event: projection.LeaseFinished})
		}
	}
	ord.Check(t, ss, true)
	reshardcheck.CheckKeys(t, ss, applied)
}
