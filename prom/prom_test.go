package prom_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/prom"
)

// gather returns every series of m as "name{label=value,...}" -> value (histograms: _count and
// _sum, and _bucket{le=...} cumulative counts).
func gather(t *testing.T, m *prom.Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			ls := make([]string, 0, len(x.GetLabel()))
			for _, l := range x.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := func(suffix string, extra ...string) string {
				all := append(append([]string{}, ls...), extra...)
				sort.Strings(all)
				return mf.GetName() + suffix + "{" + strings.Join(all, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = x.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = x.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := x.GetHistogram()
				out[key("_count")] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%g", b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
			default:
				t.Fatalf("unexpected metric type %v of %s", mf.GetType(), mf.GetName())
			}
		}
	}
	return out
}

func shard(id string, epoch int64) projection.ShardInfo {
	return projection.ShardInfo{Projection: "p", ShardID: id, Epoch: epoch}
}

func lease(id string, epoch int64, ev projection.LeaseEvent, how string) projection.LeaseInfo {
	return projection.LeaseInfo{ShardInfo: shard(id, epoch), Worker: "w", Event: ev, How: how}
}

// TestHooks drives the hooks as the core and the container runner call them and checks every
// series of the metrics the case is about (exactly: a series too many fails the case).
func TestHooks(t *testing.T) {
	s0, s1 := "shardId-000000000000", "shardId-000000000001"
	cases := []struct {
		name    string
		metrics []string // the metric names checked (every series of them)
		calls   func(h projection.Hooks)
		want    map[string]float64
	}{
		{
			name:    "batches: events, batches, mutations, duration, memory",
			metrics: []string{"projhost_events_total", "projhost_batches_total", "projhost_mutations_total", "projhost_shard_memory_bytes"},
			calls: func(h projection.Hooks) {
				h.Batch(projection.BatchInfo{ShardInfo: shard(s0, 1), Events: 500, Mutations: 20, Duration: 3 * time.Millisecond, MemoryBytes: 2 << 16})
				h.Batch(projection.BatchInfo{ShardInfo: shard(s0, 1), Events: 7, Mutations: 1, Duration: time.Millisecond, MemoryBytes: 3 << 16})
				h.Batch(projection.BatchInfo{ShardInfo: shard(s1, 1), Events: 1, Mutations: 0, Duration: 2 * time.Second, MemoryBytes: 1 << 16})
			},
			want: map[string]float64{
				"projhost_events_total{projection=p,shard=" + s0 + "}":       507,
				"projhost_events_total{projection=p,shard=" + s1 + "}":       1,
				"projhost_batches_total{projection=p,shard=" + s0 + "}":      2,
				"projhost_batches_total{projection=p,shard=" + s1 + "}":      1,
				"projhost_mutations_total{projection=p,shard=" + s0 + "}":    21,
				"projhost_mutations_total{projection=p,shard=" + s1 + "}":    0,
				"projhost_shard_memory_bytes{projection=p,shard=" + s0 + "}": 3 << 16,
				"projhost_shard_memory_bytes{projection=p,shard=" + s1 + "}": 1 << 16,
			},
		},
		{
			name:    "handler duration histogram, per projection",
			metrics: []string{"projhost_handler_duration_seconds"},
			calls: func(h projection.Hooks) {
				h.Batch(projection.BatchInfo{ShardInfo: shard(s0, 1), Events: 1, Duration: 3 * time.Millisecond})
				h.Batch(projection.BatchInfo{ShardInfo: shard(s1, 1), Events: 1, Duration: 2 * time.Second})
			},
			want: func() map[string]float64 {
				w := map[string]float64{
					"projhost_handler_duration_seconds_count{projection=p}": 2,
					"projhost_handler_duration_seconds_sum{projection=p}":   2.003,
				}
				for _, b := range prom.DurationBuckets {
					n := 0.0
					if b >= 0.003 {
						n++
					}
					if b >= 2 {
						n++
					}
					w[fmt.Sprintf("projhost_handler_duration_seconds_bucket{le=%g,projection=p}", b)] = n
				}
				return w
			}(),
		},
		{
			name:    "handler errors by kind",
			metrics: []string{"projhost_handler_errors_total"},
			calls: func(h projection.Hooks) {
				for range 3 {
					h.HandlerError(projection.HandlerErrorInfo{ShardInfo: shard(s0, 1), Kind: projection.KindTrap, Err: errors.New("trap")})
				}
				h.HandlerError(projection.HandlerErrorInfo{ShardInfo: shard(s0, 1), Kind: projection.KindDeadline})
				h.HandlerError(projection.HandlerErrorInfo{ShardInfo: shard(s1, 1), Kind: projection.KindBadOutput})
			},
			want: map[string]float64{
				"projhost_handler_errors_total{kind=trap,projection=p,shard=" + s0 + "}":       3,
				"projhost_handler_errors_total{kind=deadline,projection=p,shard=" + s0 + "}":   1,
				"projhost_handler_errors_total{kind=bad_output,projection=p,shard=" + s1 + "}": 1,
			},
		},
		{
			name:    "dead letters, replays, stops, cursor saves, dropped log lines",
			metrics: []string{"projhost_dead_letters_total", "projhost_dead_letter_replays_total", "projhost_shard_stops_total", "projhost_cursor_saves_total", "projhost_guest_log_lines_dropped_total"},
			calls: func(h projection.Hooks) {
				l := deadletter.Letter{Projection: "p", ShardID: s0, Seq: "5"}
				h.DeadLettered(l)
				h.DeadLettered(deadletter.Letter{Projection: "p", ShardID: s0, Seq: "9"})
				h.Replayed(l, nil)
				h.Replayed(l, errors.New("failed again"))
				h.Replayed(l, errors.New("failed again"))
				h.Stopped(shard(s1, 2), "trap at 7")
				h.Flush(projection.FlushInfo{ShardInfo: shard(s0, 1), Seq: "10", Events: 10})
				h.Flush(projection.FlushInfo{ShardInfo: shard(s0, 1), Seq: "5", Replay: "5"})
				h.Flush(projection.FlushInfo{ShardInfo: shard(s1, 2), Seq: "3", Events: 3})
				h.LogDropped(projection.LogDroppedInfo{ShardInfo: shard(s1, 2), Lines: 40, Total: 40})
				h.LogDropped(projection.LogDroppedInfo{ShardInfo: shard(s1, 2), Lines: 2, Total: 42})
			},
			want: map[string]float64{
				"projhost_dead_letters_total{projection=p,shard=" + s0 + "}":                      2,
				"projhost_dead_letter_replays_total{projection=p,result=ok,shard=" + s0 + "}":     1,
				"projhost_dead_letter_replays_total{projection=p,result=failed,shard=" + s0 + "}": 2,
				"projhost_shard_stops_total{projection=p,shard=" + s1 + "}":                       1,
				"projhost_cursor_saves_total{projection=p,shard=" + s0 + "}":                      2,
				"projhost_cursor_saves_total{projection=p,shard=" + s1 + "}":                      1,
				"projhost_guest_log_lines_dropped_total{projection=p,shard=" + s1 + "}":           42,
			},
		},
		{
			name:    "lag: the last read's figures, falling to 0",
			metrics: []string{"projhost_shard_lag_events", "projhost_shard_lag_seconds"},
			calls: func(h projection.Hooks) {
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: 4500, MillisBehind: 1500})
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: 0, MillisBehind: 0})
				h.Lag(projection.LagInfo{ShardInfo: shard(s1, 1), EventsBehind: 12, MillisBehind: 250})
			},
			want: map[string]float64{
				"projhost_shard_lag_events{projection=p,shard=" + s0 + "}":  0,
				"projhost_shard_lag_seconds{projection=p,shard=" + s0 + "}": 0,
				"projhost_shard_lag_events{projection=p,shard=" + s1 + "}":  12,
				"projhost_shard_lag_seconds{projection=p,shard=" + s1 + "}": 0.25,
			},
		},
		{
			name:    "lag: an unknown figure (-1, Kinesis) removes the series",
			metrics: []string{"projhost_shard_lag_events", "projhost_shard_lag_seconds"},
			calls: func(h projection.Hooks) {
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: 3, MillisBehind: 2000})
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: -1, MillisBehind: 700})
				h.Lag(projection.LagInfo{ShardInfo: shard(s1, 1), EventsBehind: -1, MillisBehind: -1})
			},
			want: map[string]float64{
				"projhost_shard_lag_seconds{projection=p,shard=" + s0 + "}": 0.7,
			},
		},
		{
			name:    "module info: one series per shard, replaced at a hot swap",
			metrics: []string{"projhost_shard_module_info"},
			calls: func(h projection.Hooks) {
				h.Module(projection.ModuleInfo{ShardInfo: shard(s0, 1), Module: "p v1"})
				h.Module(projection.ModuleInfo{ShardInfo: shard(s1, 1), Module: "p v1"})
				h.Module(projection.ModuleInfo{ShardInfo: shard(s0, 1), Module: "p v2", From: "p v1", Seq: "40"})
				h.Module(projection.ModuleInfo{ShardInfo: shard(s1, 1), Module: "handler.wasm"})
			},
			want: map[string]float64{
				"projhost_shard_module_info{module=p v2,projection=p,shard=" + s0 + ",version=2}":        1,
				"projhost_shard_module_info{module=handler.wasm,projection=p,shard=" + s1 + ",version=}": 1,
			},
		},
		{
			name:    "leases: held, acquired by how, lost",
			metrics: []string{"projhost_leases_held", "projhost_leases_acquired_total", "projhost_leases_lost_total"},
			calls: func(h projection.Hooks) {
				h.Lease(lease(s0, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease(s1, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease("shardId-000000000002", 4, projection.LeaseAcquired, "steal"))
				h.Lease(lease(s0, 1, projection.LeaseLost, ""))
				h.Lease(lease(s1, 1, projection.LeaseReleased, ""))
				h.Lease(lease(s0, 3, projection.LeaseAcquired, "expired"))
			},
			want: map[string]float64{
				"projhost_leases_held{projection=p}":                       2,
				"projhost_leases_acquired_total{how=free,projection=p}":    2,
				"projhost_leases_acquired_total{how=steal,projection=p}":   1,
				"projhost_leases_acquired_total{how=expired,projection=p}": 1,
				"projhost_leases_lost_total{projection=p}":                 1,
			},
		},
		{
			name:    "pause: the lag is unknown (no series) and paused is 1 until resumed; a lease's end removes paused",
			metrics: []string{"projhost_shard_paused", "projhost_shard_lag_events", "projhost_shard_lag_seconds"},
			calls: func(h projection.Hooks) {
				h.Lease(lease(s0, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease(s1, 2, projection.LeaseAcquired, "free"))
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: 0, MillisBehind: 0})
				h.Lag(projection.LagInfo{ShardInfo: shard(s1, 2), EventsBehind: 0, MillisBehind: 0})
				h.Lease(lease(s0, 1, projection.LeasePaused, ""))
				h.Lease(lease(s1, 2, projection.LeasePaused, ""))
				h.Lease(lease(s1, 2, projection.LeaseResumed, ""))
				h.Lag(projection.LagInfo{ShardInfo: shard(s1, 2), EventsBehind: 7, MillisBehind: 1500})
				h.Lease(lease(s0, 0, projection.LeasePaused, "")) // another acquisition's: ignored
			},
			want: map[string]float64{
				"projhost_shard_paused{projection=p,shard=" + s0 + "}":      1,
				"projhost_shard_lag_events{projection=p,shard=" + s1 + "}":  7,
				"projhost_shard_lag_seconds{projection=p,shard=" + s1 + "}": 1.5,
			},
		},
		{
			name:    "paused, then the lease ends: no paused series",
			metrics: []string{"projhost_shard_paused"},
			calls: func(h projection.Hooks) {
				h.Lease(lease(s0, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease(s0, 1, projection.LeasePaused, ""))
				h.Lease(lease(s0, 1, projection.LeaseReleased, ""))
			},
			want: map[string]float64{},
		},
		{
			name:    "leases: the end of an older acquisition reported after a re-acquisition keeps the lease held",
			metrics: []string{"projhost_leases_held", "projhost_shard_lag_events"},
			calls: func(h projection.Hooks) {
				h.Lease(lease(s0, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease(s0, 2, projection.LeaseAcquired, "retake"))
				h.Lease(lease(s0, 1, projection.LeaseLost, ""))
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 2), EventsBehind: 9, MillisBehind: -1})
			},
			want: map[string]float64{
				"projhost_leases_held{projection=p}":                       1,
				"projhost_shard_lag_events{projection=p,shard=" + s0 + "}": 9,
			},
		},
		{
			name: "a lease's end removes the shard's gauges; late reports of the ended acquisition are ignored; counters stay",
			metrics: []string{"projhost_shard_lag_events", "projhost_shard_lag_seconds", "projhost_shard_memory_bytes",
				"projhost_shard_module_info", "projhost_events_total", "projhost_leases_held"},
			calls: func(h projection.Hooks) {
				h.Lease(lease(s0, 1, projection.LeaseAcquired, "free"))
				h.Lease(lease(s1, 5, projection.LeaseAcquired, "free"))
				for _, s := range []projection.ShardInfo{shard(s0, 1), shard(s1, 5)} {
					h.Module(projection.ModuleInfo{ShardInfo: s, Module: "p v1"})
					h.Lag(projection.LagInfo{ShardInfo: s, EventsBehind: 100, MillisBehind: 100})
					h.Batch(projection.BatchInfo{ShardInfo: s, Events: 10, MemoryBytes: 1 << 16})
				}
				h.Lease(lease(s0, 1, projection.LeaseLost, ""))
				h.Lag(projection.LagInfo{ShardInfo: shard(s0, 1), EventsBehind: 90, MillisBehind: 90})
				h.Batch(projection.BatchInfo{ShardInfo: shard(s0, 1), Events: 10, MemoryBytes: 1 << 16})
				h.Module(projection.ModuleInfo{ShardInfo: shard(s0, 1), Module: "p v2"})
				h.Lease(lease(s1, 5, projection.LeaseFinished, ""))
			},
			want: map[string]float64{
				"projhost_events_total{projection=p,shard=" + s0 + "}": 20,
				"projhost_events_total{projection=p,shard=" + s1 + "}": 10,
				"projhost_leases_held{projection=p}":                   0,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := prom.New()
			c.calls(m.Hooks())
			got := map[string]float64{}
			for k, v := range gather(t, m) {
				for _, n := range c.metrics {
					if strings.HasPrefix(k, n+"{") || strings.HasPrefix(k, n+"_count{") || strings.HasPrefix(k, n+"_sum{") || strings.HasPrefix(k, n+"_bucket{") {
						got[k] = v
					}
				}
			}
			require.InDeltaMapValues(t, c.want, got, 1e-9)
			require.Len(t, got, len(c.want), "series: %v", got)
		})
	}
}

// TestLint checks the metric names, help texts and units with client_golang's linter
// (promlint: _total counters, base units, no camel case).
func TestLint(t *testing.T) {
	m := prom.New()
	h := m.Hooks()
	s := shard("shardId-000000000000", 1)
	h.Lease(lease(s.ShardID, 1, projection.LeaseAcquired, "free"))
	h.Batch(projection.BatchInfo{ShardInfo: s, Events: 1, Duration: time.Millisecond, MemoryBytes: 1 << 16})
	h.Flush(projection.FlushInfo{ShardInfo: s})
	h.HandlerError(projection.HandlerErrorInfo{ShardInfo: s, Kind: projection.KindFail})
	h.DeadLettered(deadletter.Letter{Projection: "p", ShardID: s.ShardID})
	h.Replayed(deadletter.Letter{Projection: "p", ShardID: s.ShardID}, nil)
	h.Stopped(s, "x")
	h.Lag(projection.LagInfo{ShardInfo: s, EventsBehind: 1, MillisBehind: 1})
	h.LogDropped(projection.LogDroppedInfo{ShardInfo: s, Lines: 1})
	h.Module(projection.ModuleInfo{ShardInfo: s, Module: "p v1"})
	h.Lease(lease("shardId-000000000001", 1, projection.LeaseLost, ""))
	h.Lease(lease("shardId-000000000002", 1, projection.LeaseAcquired, "free"))
	h.Lease(lease("shardId-000000000002", 1, projection.LeasePaused, ""))
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, 18, testutil.CollectAndCount(m,
		"projhost_events_total", "projhost_batches_total", "projhost_mutations_total", "projhost_handler_duration_seconds",
		"projhost_handler_errors_total", "projhost_dead_letters_total", "projhost_dead_letter_replays_total",
		"projhost_shard_stops_total", "projhost_cursor_saves_total", "projhost_guest_log_lines_dropped_total",
		"projhost_shard_lag_events", "projhost_shard_lag_seconds", "projhost_shard_memory_bytes", "projhost_shard_module_info",
		"projhost_leases_held", "projhost_leases_acquired_total", "projhost_leases_lost_total", "projhost_shard_paused"),
		"one series of each of the 18 metrics")
}

// TestConcurrentHooks runs the hooks of many shards at once with scrapes in between (for -race)
// and checks the totals.
func TestConcurrentHooks(t *testing.T) {
	m := prom.New()
	h := m.Hooks()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("shardId-%012d", i)
			h.Lease(lease(id, 1, projection.LeaseAcquired, "free"))
			for j := range 100 {
				h.Batch(projection.BatchInfo{ShardInfo: shard(id, 1), Events: 2, MemoryBytes: 1 << 16})
				h.Lag(projection.LagInfo{ShardInfo: shard(id, 1), EventsBehind: int64(99 - j), MillisBehind: 0})
				h.Flush(projection.FlushInfo{ShardInfo: shard(id, 1)})
			}
		}()
	}
	for range 20 {
		gather(t, m)
	}
	wg.Wait()
	got := gather(t, m)
	var events, lag float64
	for k, v := range got {
		if strings.HasPrefix(k, "projhost_events_total{") {
			events += v
		}
		if strings.HasPrefix(k, "projhost_shard_lag_events{") {
			lag += v
		}
	}
	require.Equal(t, 1600.0, events)
	require.Equal(t, 0.0, lag)
	require.Equal(t, 8.0, got["projhost_leases_held{projection=p}"])
}
