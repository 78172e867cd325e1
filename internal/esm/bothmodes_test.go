package esm_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/esm"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/testwasm"
)

// TestBothModesSameReadModel (issue 12: one module file runs unchanged in both modes, with
// identical read models): flights-2k on one 4-shard stream of kinesis-local (partition key
// origin), and the same file, build/wasm/flightdelays-as.wasm, run
//   - in Lambda mode as projection "lambda-p": deployed as its active version (module store in
//     S3), run by the real bootstrap under the real Runtime Interface Emulator (one per shard),
//     fed by the driver until every shard's checkpoint is at its tip;
//   - in container mode as projection "container-p": the real `projhost run --source kinesis
//     --store dynamodb --handler FILE --until-caught-up` process on the same DynamoDB tables;
//
// then both read models are the same documents byte for byte (collections, keys, JSON), equal to
// flightcheck's independent computation, and both projections' cursors are at every shard's tip.
func TestBothModesSameReadModel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the emulator and a projhost process take a minute")
	}
	const shards = 4
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	module := testwasm.Path(t, testwasm.FlightDelaysAS)
	projhost := filepath.Join(t.TempDir(), "projhost")
	built := make(chan error, 1)
	go func() { built <- goBuild(testwasm.RepoRoot(t), projhost, "./cmd/projhost") }()
	le := newLambdaEnv(t)
	le.deploy(t, "lambda-p", testwasm.FlightDelaysAS)

	// 20 s to a minute on a 2-core machine beside a CI run (the Lambda mode's part is most of it);
	// the bound is for a heavier load.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kc := kinesistest.Client(t)
	stream, arn := kinesistest.Stream(t, kc, shards)
	putFlights(ctx, t, kc, stream, fs, flightcheck.Flight.JSON)
	tips, _ := streamTips(ctx, t, kc, stream)

	// (a) Lambda mode.
	start := time.Now()
	_, _, invokers := le.shardEmulators(ctx, t, kc, arn, shards, "lambda-p", t.TempDir())
	d, err := esm.New(driverConfig(t, kc, arn, invokers))
	require.NoError(t, err)
	require.NoError(t, d.RunToTip(ctx))
	require.Equal(t, tips, d.Checkpoints(), "every shard checkpointed at its tip")
	t.Logf("Lambda mode: %d flights in %v", len(fs), time.Since(start).Round(time.Millisecond))

	// (b) Container mode.
	require.NoError(t, <-built)
	start = time.Now()
	run := exec.CommandContext(ctx, projhost, "run", "--source", "kinesis", "--stream", stream,
		"--kinesis-endpoint", kinesistest.Endpoint(t), "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t),
		"--table-prefix", le.prefix, "--module-store", t.TempDir(), "--name", "container-p", "--handler", module,
		"--until-caught-up", "--log-level", "warn")
	out, err := run.CombinedOutput()
	require.NoError(t, err, "projhost run --until-caught-up: %s", out)
	t.Logf("container mode: %d flights in %v", len(fs), time.Since(start).Round(time.Millisecond))

	lambdaDocs, containerDocs := le.docs(t, "lambda-p"), le.docs(t, "container-p")
	flightcheck.Check(t, fs, lambdaDocs)
	require.Equal(t, lambdaDocs, containerDocs, "the same documents in both modes")
	for _, proj := range []string{"lambda-p", "container-p"} {
		for id, tip := range tips {
			c, err := le.st.Cursors.Get(ctx, proj, id)
			require.NoError(t, err)
			require.Equal(t, tip, c.Seq, "%s's cursor of %s", proj, id)
		}
	}
}
