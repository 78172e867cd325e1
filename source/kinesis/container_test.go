package kinesis_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/reshardcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/sqlite"
)

// TestContainerResharding: two container workers project flights-2k from a kinesis-local stream
// of 2 shards while both shards are split and the two middle children merged under them. Every
// closed shard is finished by the host, no child is handled before all its parents finished, and
// the read model equals the independent computation.
func TestContainerResharding(t *testing.T) {
	c := kinesistest.Client(t)
	name, _ := kinesistest.Stream(t, c, 2)
	src, err := kinesissrc.New(c, name, kinesissrc.WithLogger(quiet))
	require.NoError(t, err)
	rs := resharder(c, name)
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	st, mod := flightStore(t)
	ctx := context.Background()

	put := func(part []flightcheck.Flight) { putFlights(t, c, name, part) }
	ord := reshardcheck.New()
	hooks := ord.Hooks()
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	done := make(chan error, 2)
	for _, id := range []string{"w1", "w2"} {
		r, err := container.New(container.Config{
			Config: projection.Config{Projection: "flights", Stores: st, Modules: projection.Fixed(mod), Logger: quiet,
				Hooks: hooks, CursorEveryEvents: 100},
			WorkerID: id, Source: src, BatchSize: 100, BatchWait: 10 * time.Millisecond,
			LeaseDuration: 30 * time.Second, ShardSync: 200 * time.Millisecond, ControlCheck: 50 * time.Millisecond,
		})
		require.NoError(t, err)
		go func() { done <- r.Run(runCtx) }()
	}

	put(fs[:400])
	ss, err := src.Shards(ctx)
	require.NoError(t, err)
	a, err := rs.Split(ctx, ss[0].ID)
	require.NoError(t, err)
	put(fs[400:900])
	b, err := rs.Split(ctx, ss[1].ID)
	require.NoError(t, err)
	put(fs[900:1400])
	byID := map[string]source.Shard{}
	ss, err = src.Shards(ctx)
	require.NoError(t, err)
	for _, s := range ss {
		byID[s.ID] = s
	}
	upper, lower := a[1], b[0] // the upper child of shard 0 and the lower of shard 1 are adjacent
	if hashLess(byID[a[1]].HashKeyStart, byID[a[0]].HashKeyStart) {
		upper = a[0]
	}
	if hashLess(byID[b[1]].HashKeyStart, byID[b[0]].HashKeyStart) {
		lower = b[1]
	}
	_, err = rs.Merge(ctx, upper, lower)
	require.NoError(t, err)
	put(fs[1400:])

	want := flightcheck.Expected(fs)
	for {
		docs, err := st.ReadModel.Scan(ctx, "flights", "")
		require.NoError(t, err)
		got, err := flightcheck.Decode(docs)
		require.NoError(t, err)
		if len(flightcheck.Diff(want, got, 1)) == 0 {
			break
		}
		select {
		case <-runCtx.Done():
			t.Fatalf("read model not complete within 3 minutes: %v", flightcheck.Diff(want, got, 5))
		case <-time.After(200 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-done)

	ss, err = src.Shards(ctx)
	require.NoError(t, err)
	require.Len(t, ss, 7)
	ord.Check(t, ss, false) // a child may get no record
}

var quiet = slog.New(slog.DiscardHandler)

// putFlights puts flights to stream, partition key origin, and fails unless every record was
// stored at the first try (a record sent again lands after later ones of its key).
func putFlights(t *testing.T, c *kinesis.Client, stream string, flights []flightcheck.Flight) {
	t.Helper()
	entries := make([]types.PutRecordsRequestEntry, len(flights))
	for i, f := range flights {
		entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(f.Origin), Data: f.JSON()}
	}
	resent, err := kinesistest.Put(context.Background(), c, stream, entries)
	require.NoError(t, err)
	require.Zero(t, resent, "entries sent again: the order of their keys is lost")
}

// flightStore returns an embedded store in a temporary directory and the flightdelays handler
// (AssemblyScript build) loaded, both closed when t ends.
func flightStore(t *testing.T) (*store.Stores, *host.Module) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	wasm, err := os.ReadFile(testwasm.Path(t, testwasm.FlightDelaysAS))
	require.NoError(t, err)
	mod, err := rt.Load(ctx, testwasm.FlightDelaysAS, wasm)
	require.NoError(t, err)
	return st, mod
}
