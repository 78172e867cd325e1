package container_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

func moduleID(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(testwasm.Path(t, name))
	require.NoError(t, err)
	return container.ModuleID(b)
}

// TestDifferentModuleRefused: a second worker with another module on a running projection
// refuses to start without taking a lease (Run returns the conflict naming both modules and
// the live worker); the first keeps its leases and its read model is exactly its handler's.
func TestDifferentModuleRefused(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 4)
	e.append(t, fs)
	idA, idB := moduleID(t, testwasm.FlightDelaysAS), moduleID(t, testwasm.CountAS)
	require.NotEqual(t, idA, idB)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, idA)

	const lease = 6 * time.Second
	var lostA []string
	var muA sync.Mutex
	ra := e.runner(t, func(c *container.Config) {
		c.WorkerID, c.ModuleID, c.UntilCaughtUp, c.LeaseDuration = "a", idA, false, lease
		c.Hooks.Lease = func(i projection.LeaseInfo) {
			if i.Event == projection.LeaseLost {
				muA.Lock()
				lostA = append(lostA, i.Reason)
				muA.Unlock()
			}
		}
	})
	ctx := ctx2m(t)
	ctxA, stopA := context.WithCancel(ctx)
	defer stopA()
	doneA := make(chan error, 1)
	go func() { doneA <- ra.Run(ctxA) }()
	require.Eventually(t, func() bool { return len(ra.Owned()) == 4 }, time.Minute, 10*time.Millisecond)

	var acquiredB atomic.Int64
	rb := e.runner(t, func(c *container.Config) {
		c.WorkerID, c.ModuleID, c.LeaseDuration = "b", idB, lease
		c.Modules = projection.Fixed(load(t, testwasm.CountAS))
		c.Hooks.Lease = func(i projection.LeaseInfo) {
			if i.Event == projection.LeaseAcquired {
				acquiredB.Add(1)
			}
		}
	})
	err := rb.Run(ctx)
	var ce *shardmap.ModuleConflictError
	require.True(t, errors.As(err, &ce), "Run of the second module: %v", err)
	require.ErrorIs(t, err, shardmap.ErrModuleConflict)
	require.Equal(t, shardmap.ModuleConflictError{Projection: "flights", Module: idB, OtherWorker: "a", OtherModule: idA, ShardID: ce.ShardID}, *ce)
	require.Zero(t, acquiredB.Load())
	require.Zero(t, rb.Stats().Events)

	require.Eventually(t, func() bool { return ra.Stats().Events == int64(len(fs)) }, time.Minute, 10*time.Millisecond)
	stopA()
	require.NoError(t, <-doneA)
	// b wrote no lease: a lost none to another writer (a lapse on a loaded machine is no sign
	// of b).
	for _, why := range lostA {
		require.NotContains(t, why, shardmap.WhyWritten)
		require.NotContains(t, why, shardmap.WhyConflict)
	}
	e.check(t, fs)
}

// TestModuleSwitchAfterGracefulStop: once every worker of the old module stopped gracefully
// (leases released), a worker of a new module starts at once: it takes the leases as free,
// not after they expire.
func TestModuleSwitchAfterGracefulStop(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 2)
	e.append(t, fs[:200])
	ra := e.runner(t, func(c *container.Config) { c.WorkerID, c.ModuleID = "a", moduleID(t, testwasm.FlightDelaysAS) })
	// Each Run with its own generous bound, counted from its start (not from before the
	// modules compile): Run returns nil when its context ends, and the counts below would then
	// fail for a slow machine's sake rather than the module switch's.
	require.NoError(t, ra.Run(ctx10m(t)))
	e.append(t, fs[200:400])
	var how []string
	var mu sync.Mutex
	rb := e.runner(t, func(c *container.Config) {
		c.WorkerID, c.ModuleID = "b", moduleID(t, testwasm.FlightDelaysGo)
		c.Modules = projection.Fixed(load(t, testwasm.FlightDelaysGo))
		c.Hooks.Lease = func(i projection.LeaseInfo) {
			if i.Event == projection.LeaseAcquired {
				mu.Lock()
				how = append(how, i.How)
				mu.Unlock()
			}
		}
	})
	require.NoError(t, rb.Run(ctx10m(t)))
	require.EqualValues(t, 200, rb.Stats().Events)
	require.Equal(t, []string{shardmap.HowFree, shardmap.HowFree}, how)
	e.check(t, fs[:400])
}

// ctx10m is a context that ends after 10 minutes: a bound for a run that would otherwise hang,
// never a timing assertion.
func ctx10m(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
