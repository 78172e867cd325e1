package e2esuite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
)

// testModuleSwap (issue 11): a worker started with another --handler under the same projection
// name switches every worker to its module. Worker a runs `run --handler count` (version 1)
// over 4 shards while events flow; worker b starts with --handler flightdelays: it deploys and
// activates it as version 2, and every shard switches to it at a batch boundary (a's on their
// next batch, the ones b takes as it opens them); then worker c starts with --handler count
// again: the stored version 1 is activated (nothing new stored) and every shard switches back.
// The traces' module records show each switch; no worker exits; the workers share the shards.
// The read model is exact per switch point: the counts documents count exactly the events of
// each shard's count periods, the airports and routes documents equal the computation over
// the events of its flightdelays period, on every store (a lease moving while the version
// changes included: a new owner handles an interrupted write's range again with the version that
// wrote it).
func testModuleSwap(t *testing.T, e *Env) {
	fs := flights(t)
	e.Create(4)
	e.Append(fs[:1500])
	const count, fd = Projection + " v1", Projection + " v2"
	spec := func(h string) Spec { return Spec{Handler: h, Flags: bulkFlags} }
	var ws []*Worker
	start := func(id, h string) {
		ws = append(ws, e.Start(id, spec(h)))
	}
	// every waits until every shard has switched to module since at, by any worker.
	every := func(module string, at time.Time) {
		t.Helper()
		e.Eventually("every shard running "+module, 2*time.Minute, func() (bool, string) {
			for _, w := range ws {
				select {
				case <-w.done:
					t.Fatalf("worker %s exited: %v\n%s", w.ID, w.err, tail(w.Stderr(), 20))
				default:
				}
			}
			sw := switchesOf(t, ws...)
			for _, s := range e.Shards() {
				if !runs(sw[s], module, at) {
					return false, fmt.Sprint(sw)
				}
			}
			if !at.IsZero() {
				t.Logf("every shard runs %s %s after the worker started", module, time.Since(at).Round(10*time.Millisecond))
			}
			return true, ""
		})
	}
	start("a", testwasm.CountAS)
	every(count, time.Time{})
	// Events flow on every shard (each switches at its next batch) until the last switch.
	stop, appended := make(chan struct{}), make(chan struct{})
	n := 1500
	go func() {
		defer close(appended)
		for ; n < len(fs); n += 100 {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			if _, errOut, err := e.run(e.stream.appendArgs(e.flightsFile(fs[n : n+100]))...); err != nil {
				t.Errorf("append: %v: %s", err, errOut)
				return
			}
		}
	}()
	var once sync.Once
	stopAppending := func() { once.Do(func() { close(stop) }); <-appended }
	t.Cleanup(stopAppending)
	time.Sleep(time.Second)
	at := time.Now()
	start("b", testwasm.FlightDelaysAS)
	every(fd, at)
	e.WaitOwners("a and b share the shards", time.Minute, func(m map[string]int) bool { return m["a"] == 2 && m["b"] == 2 })
	at = time.Now()
	start("c", testwasm.CountAS)
	every(count, at)
	stopAppending()
	fs = fs[:n]
	e.WaitCaughtUp(3 * time.Minute)
	for _, w := range ws {
		w.Stop(t)
	}

	ctx := context.Background()
	reg := e.Stores().Registry
	vs, err := reg.Versions(ctx, Projection)
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Active(ctx, Projection)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || a.Version != 1 || a.Previous != 2 {
		t.Errorf("registry: %d versions, version %d active (was %d); want 2 versions, version 1 active again (was 2)", len(vs), a.Version, a.Previous)
	}
	events, err := e.stream.contents(ctx, e.Shards())
	if err != nil {
		t.Fatal(err)
	}
	sw := switchesOf(t, ws...)
	docs, err := e.Stores().ReadModel.Scan(ctx, Projection, "")
	if err != nil {
		t.Fatal(err)
	}
	nCount, nFD := CheckCountThenFlightDelays(t, ByModule(t, sw, events), count, fd, docs)
	if nCount+nFD != len(fs) || nFD == 0 {
		t.Errorf("%d events handled by count, %d by flightdelays; want %d in all, some by each", nCount, nFD, len(fs))
	}
	t.Logf("%d events handled by count, %d by flightdelays; switch points %v", nCount, nFD, sw)
	e.checkHistory()
}

// runs tells whether a shard's switch points include module at or after at.
func runs(sw []Switch, module string, at time.Time) bool {
	for _, s := range sw {
		if s.Module == module && !s.At.Before(at) {
			return true
		}
	}
	return false
}
