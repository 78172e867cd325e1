package lambda_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
)

// TestFirstInvocation measures (PROJHOST_LAMBDA_MEASURE=1; run without -race) the first Handle
// of a fresh Handler (a new container: its runtime, the module fetched from S3 and compiled)
// with an empty and with a warm compilation cache directory (Warm, then the invocation), for flightdelays in
// AssemblyScript and in Go; a batch of 100 flights. Process start-up is not included.
func TestFirstInvocation(t *testing.T) {
	if os.Getenv("PROJHOST_LAMBDA_MEASURE") == "" {
		t.Skip("set PROJHOST_LAMBDA_MEASURE=1 to measure")
	}
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:100]
	for _, module := range []string{testwasm.FlightDelaysAS, testwasm.FlightDelaysGo} {
		e := newEnv(t, module)
		cache := t.TempDir()
		for i, what := range []string{"cold cache", "warm cache", "warm cache"} {
			h, err := lambda.New(lambda.Config{Core: projection.Config{Projection: proj, Stores: e.st, Logger: quiet},
				Blobs: e.blobs, Runtime: runtime(t, cache)})
			require.NoError(t, err)
			start := time.Now()
			require.NoError(t, h.Warm(context.Background()))
			warm := time.Since(start)
			require.Empty(t, invoke(t, h, flightRecords(shardID(i), fs)))
			first := time.Since(start)
			start = time.Now()
			require.Empty(t, invoke(t, h, flightRecords(shardID(i+10), fs)))
			t.Logf("%s, %s: Warm (fetch + compile) %v, first invocation in all %v; next invocation (warm container) %v",
				module, what, warm.Round(time.Millisecond), first.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			h.Close(context.Background())
		}
	}
}
