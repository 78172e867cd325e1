package main

// Process test of the shard re-sync of `run --source kinesis` after `kinesis update-shard-count`
// (issue 10: every open shard processing within one re-sync interval).

import (
	"context"
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
	"github.com/projhost/projhost/source"
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
		file := jsonLines(t, dir, name, part)
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
	workers, stderrs := startWorkers(t, ctx, traces, append(append([]string{"--name", "f", "--handler", handler,
		"--module-store", filepath.Join(dir, "modules")}, store...), src...)...)
	stopped := false
	defer func() {
		if !stopped {
			for _, w := range workers {
				w.Process.Kill()
				w.Wait()
			}
		}
	}()
	merged := func() []projection.TraceRecord { return mergedTraces(t, traces) }
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
	ss, keys, err := kinesistest.ReadStream(context.Background(), kc, stream)
	require.NoError(t, err)
	last := map[string]string{} // shard -> its last record's sequence number
	for id, evs := range keys {
		last[id] = evs[len(evs)-1].Seq
	}
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

	flightcheck.Check(t, fs, dynamoDocs(t, dep, prefix, "f"))

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
		acq := slices.IndexFunc(recs, func(r projection.TraceRecord) bool {
			return r.Event == "lease" && r.Kind == string(projection.LeaseAcquired) && r.Shard == c
		})
		require.GreaterOrEqual(t, acq, 0, "child %s was never acquired", c)
		t.Logf("child %s (of %v): lease acquired %v after the update returned, first batch handled from %v (its handler call, reads of the read model included: %v) to %v",
			c, ps, recs[acq].Time.Sub(updated).Round(time.Millisecond), (first - time.Duration(recs[i].Micros)*time.Microsecond).Round(time.Millisecond),
			(time.Duration(recs[i].Micros) * time.Microsecond).Round(time.Millisecond), first.Round(time.Millisecond))
		require.LessOrEqual(t, first, bound, "child %s processing later than one re-sync interval (%v) after the update", c, bound)
	}
}

// checkTracedLineage checks, from trace records in time order (the workers run on one machine),
// that every closed shard was finished and no shard had a batch before each of its parents was
// finished (reshardcheck.Order), and that for every partition key no event of a shard was
// applied after one of its descendants' (reshardcheck.CheckKeys; a batch's events are the
// shard's records from its first to its last sequence number).
func checkTracedLineage(t *testing.T, ss []source.Shard, keys map[string][]source.Event, recs []projection.TraceRecord) {
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
			i := slices.IndexFunc(ks, func(e source.Event) bool { return e.Seq == r.FirstSeq })
			require.GreaterOrEqual(t, i, 0, "a batch of %s starts at %s, which the shard does not hold", r.Shard, r.FirstSeq)
			require.LessOrEqual(t, i+r.Events, len(ks), "a batch of %s from %s runs past the shard's records", r.Shard, r.FirstSeq)
			require.Equal(t, r.LastSeq, ks[i+r.Events-1].Seq, "the batch of %d events of %s from %s", r.Events, r.Shard, r.FirstSeq)
			for _, e := range ks[i : i+r.Events] {
				applied = append(applied, reshardcheck.Applied{Key: e.PartitionKey, Shard: r.Shard})
			}
		case r.Event == "lease" && r.Kind == string(projection.LeaseFinished):
			hooks.Lease(projection.LeaseInfo{ShardInfo: si, Event: projection.LeaseFinished})
		}
	}
	ord.Check(t, ss, true)
	reshardcheck.CheckKeys(t, ss, applied)
}
