package status_test

import (
	"errors"
	"testing"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/status"
)

// TestLive: the hooks' figures per shard; a report of an acquisition that ended is ignored;
// events/s over the samples.
func TestLive(t *testing.T) {
	l := status.NewLive()
	h := l.Hooks()
	at := func(e int64) projection.ShardInfo {
		return projection.ShardInfo{Projection: "p", ShardID: "s", Epoch: e}
	}
	steps := []struct {
		name string
		do   func()
		want status.LiveShard
	}{
		{"acquired", func() { h.Lease(projection.LeaseInfo{ShardInfo: at(2), Event: projection.LeaseAcquired}) },
			status.LiveShard{Owned: true, Epoch: 2, LagEvents: -1, LagMillis: -1}},
		{"batch, lag, flush, module", func() {
			h.Batch(projection.BatchInfo{ShardInfo: at(2), Events: 30})
			h.Lag(projection.LagInfo{ShardInfo: at(2), EventsBehind: 5, MillisBehind: 700})
			h.Flush(projection.FlushInfo{ShardInfo: at(2), Seq: "30"})
			h.Module(projection.ModuleInfo{ShardInfo: at(2), Module: "p v3"})
		}, status.LiveShard{Owned: true, Epoch: 2, Events: 30, LagEvents: 5, LagMillis: 700, Cursor: "30", Module: "p v3"}},
		{"paused: lag unknown", func() { h.Lease(projection.LeaseInfo{ShardInfo: at(2), Event: projection.LeasePaused}) },
			status.LiveShard{Owned: true, Epoch: 2, Events: 30, LagEvents: -1, LagMillis: -1, Paused: true, Cursor: "30", Module: "p v3"}},
		{"resumed, then a read", func() {
			h.Lease(projection.LeaseInfo{ShardInfo: at(2), Event: projection.LeaseResumed})
			h.Lag(projection.LagInfo{ShardInfo: at(2), EventsBehind: 5, MillisBehind: 700})
		}, status.LiveShard{Owned: true, Epoch: 2, Events: 30, LagEvents: 5, LagMillis: 700, Cursor: "30", Module: "p v3"}},
		{"a late report of epoch 1 is ignored", func() {
			h.Batch(projection.BatchInfo{ShardInfo: at(1), Events: 1000})
			h.Lag(projection.LagInfo{ShardInfo: at(1), EventsBehind: 99, MillisBehind: 99})
			h.Lease(projection.LeaseInfo{ShardInfo: at(1), Event: projection.LeaseLost})
		}, status.LiveShard{Owned: true, Epoch: 2, Events: 30, LagEvents: 5, LagMillis: 700, Cursor: "30", Module: "p v3"}},
		{"released", func() { h.Lease(projection.LeaseInfo{ShardInfo: at(2), Event: projection.LeaseReleased}) },
			status.LiveShard{Owned: false, Epoch: 2, Events: 30, LagEvents: 5, LagMillis: 700, Cursor: "30", Module: "p v3"}},
		{"acquired again: lag and module unknown until reported", func() { h.Lease(projection.LeaseInfo{ShardInfo: at(4), Event: projection.LeaseAcquired}) },
			status.LiveShard{Owned: true, Epoch: 4, Events: 30, LagEvents: -1, LagMillis: -1, Cursor: "30"}},
	}
	for _, s := range steps {
		s.do()
		got, ok := l.Shard("p", "s")
		if !ok || got != s.want {
			t.Fatalf("%s:\n got %+v\nwant %+v", s.name, got, s.want)
		}
	}
	if _, ok := l.Shard("p", "other"); ok {
		t.Fatal("a shard never reported is known")
	}

	h.HandlerError(projection.HandlerErrorInfo{ShardInfo: at(4), Kind: "trap", Err: errors.New("unreachable")})
	if got, _ := l.Shard("p", "s"); got.LastError != "trap: unreachable" || got.LastErrorAt.IsZero() {
		t.Fatalf("last error %q at %v", got.LastError, got.LastErrorAt)
	}
	h.Stopped(at(4), "at seq 9: trap")
	if got, _ := l.Shard("p", "s"); got.LastError != "stopped: at seq 9: trap" {
		t.Fatalf("last error %q", got.LastError)
	}

	// events/s: 30 events at t0, then 20 more every 2 s: 10 events/s.
	t0 := time.Unix(100, 0)
	l.Sample(t0)
	if got, _ := l.Shard("p", "s"); got.EventsPerSec != 0 {
		t.Fatalf("one sample: %v events/s, want 0", got.EventsPerSec)
	}
	for i := 1; i <= 8; i++ {
		h.Batch(projection.BatchInfo{ShardInfo: at(4), Events: 20})
		l.Sample(t0.Add(time.Duration(i) * 2 * time.Second))
		if got, _ := l.Shard("p", "s"); got.EventsPerSec != 10 {
			t.Fatalf("sample %d: %v events/s, want 10", i, got.EventsPerSec)
		}
	}
	l.Sample(t0.Add(18 * time.Second)) // nothing handled for 2 s: 100 events over the 10 s kept
	if got, _ := l.Shard("p", "s"); got.EventsPerSec != 8 {
		t.Fatalf("after an idle interval: %v events/s, want 8", got.EventsPerSec)
	}
}
