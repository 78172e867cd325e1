// Package prom exports a projhost worker's figures as Prometheus metrics. It is a plugin on the
// core's observer hooks: New returns a *Metrics, whose Hooks are chained with any others
// (projection.Chain) into projection.Config.Hooks (container.Config embeds it), and which is a
// prometheus.Collector to register on a registry served at /metrics (promhttp). The core knows
// nothing of Prometheus. `projhost run --listen ADDR` does exactly this.
//
//	m := prom.New()
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(m)
//	cfg.Hooks = projection.Chain(cfg.Hooks, m.Hooks())
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Labels: projection (the projection's name) and shard (the shard id, e.g.
// "shardId-000000000000"), plus those listed. Counters of a shard count what this process did
// with it: summed over the workers of a projection they give the projection's totals.
//
//	projhost_events_total{projection,shard}                  counter    events handled by the handler and accepted (a retried batch counts once; BatchInfo.Events)
//	projhost_batches_total{projection,shard}                 counter    handler batches accepted
//	projhost_mutations_total{projection,shard}               counter    mutations the accepted batches returned
//	projhost_handler_duration_seconds{projection}            histogram  time of the handler call(s) of each accepted batch, retries excluded (BatchInfo.Duration)
//	projhost_handler_errors_total{projection,shard,kind}     counter    failed handler calls (every attempt and bisection probe); kind is one of projection.KindFail, KindTrap, KindExit, KindDeadline, KindBadOutput, KindMalformedEvent
//	projhost_dead_letters_total{projection,shard}            counter    events stored as dead letters (the shard went on past them)
//	projhost_dead_letter_replays_total{projection,shard,result} counter dead-letter replays: result "ok" (committed) or "failed" (the letter is back in state failed)
//	projhost_shard_stops_total{projection,shard}             counter    shards stopped by the stop error policy (until projhost resume)
//	projhost_cursor_saves_total{projection,shard}            counter    commits of mutations and cursor (flushes), replay commits included
//	projhost_guest_log_lines_dropped_total{projection,shard} counter    guest log lines dropped past the rate limit (host.GuestLogRate)
//	projhost_shard_lag_events{projection,shard}              gauge      events after the last one read, at the last read (LagInfo.EventsBehind)
//	projhost_shard_lag_seconds{projection,shard}             gauge      how far the last event read is behind the shard's tip, at the last read (LagInfo.MillisBehind / 1000; Kinesis' MillisBehindLatest)
//	projhost_shard_paused{projection,shard}                  gauge      1 while this worker holds the lease of a paused shard (projhost pause; LeasePaused to LeaseResumed); its lag series are absent meanwhile
//	projhost_shard_memory_bytes{projection,shard}            gauge      linear memory of the shard's handler instance after its last batch (BatchInfo.MemoryBytes)
//	projhost_shard_module_info{projection,shard,module,version} gauge   1 for the handler module the shard runs: module is its name (host.Module.Name, "<projection> v<N>" for a registry version), version the registry version number N ("" for another name)
//	projhost_leases_held{projection}                         gauge      shard leases this worker holds (acquired and not yet lost, released or finished)
//	projhost_leases_acquired_total{projection,how}           counter    leases acquired; how is "free", "expired", "steal" or "retake" (LeaseInfo.How)
//	projhost_leases_lost_total{projection}                   counter    leases lost (expired, taken by another worker, or a fenced write)
//
// The lag gauges are the ones to alert on: both are 0 when a shard's reader is at its tip. A
// figure the source does not know (-1: the events behind on Kinesis, the time behind after a
// Kinesis page that had records at the tip) removes the series until it is known again, so an
// absent series means unknown, never caught up. The shard gauges (lag, memory, module) describe
// the shards this worker runs now: they are removed when its lease on the shard ends (lost,
// released, finished), and a late report of an acquisition that ended is ignored, so two
// workers never both export a shard's lag. In Lambda mode (no leases) they stay until the
// process ends.
//
// The handler duration histogram has the projection label only (buckets
// DurationBuckets): per shard it would cost a series per bucket and shard, and the shard
// counters already tell which shard is slow.
//
// # Concurrency
//
// A Metrics is safe for concurrent use: hooks of every shard (and of several projections) may
// call it at once, and Collect may run meanwhile. Each hook takes one mutex for a few map and
// vector operations.
package prom

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/projection"
)

// DurationBuckets are the upper bounds, in seconds, of projhost_handler_duration_seconds'
// buckets: from 1 ms to the default batch deadline (5 s) and twice it.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Metrics is the set of projhost metrics fed by Hooks (see the package doc). Create it with
// New.
type Metrics struct {
	events, batches, mutations, deadLetters, stops, saves, logDropped *prometheus.CounterVec
	handlerErrors, replays                                            *prometheus.CounterVec
	duration                                                          *prometheus.HistogramVec
	lagEvents, lagSeconds, memory, moduleInfo, paused                 *prometheus.GaugeVec
	leasesHeld                                                        *prometheus.GaugeVec
	leasesAcquired, leasesLost                                        *prometheus.CounterVec

	mu sync.Mutex
	// held: per projection, the epoch of each shard lease held (LeaseAcquired not yet ended).
	held map[string]map[string]int64
	// ended: per projection and shard, the highest epoch whose acquisition ended: reports of
	// an acquisition at or below it come late and are ignored by the shard gauges.
	ended map[shardKey]int64
	// module: the module_info label values set for a shard (to remove them on a change).
	module map[shardKey][2]string
}

type shardKey struct{ projection, shard string }

// New returns a Metrics with every metric at zero (no series yet: a series appears with its
// first observation).
func New() *Metrics {
	ps := []string{"projection", "shard"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "projhost", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "projhost", Name: name, Help: help}, labels)
	}
	return &Metrics{
		events:      counter("events_total", "Events handled by the handler and accepted (a retried batch counts once).", ps...),
		batches:     counter("batches_total", "Handler batches accepted.", ps...),
		mutations:   counter("mutations_total", "Mutations returned by the accepted batches.", ps...),
		deadLetters: counter("dead_letters_total", "Events stored as dead letters.", ps...),
		stops:       counter("shard_stops_total", "Shards stopped by the stop error policy.", ps...),
		saves:       counter("cursor_saves_total", "Commits of mutations and cursor (flushes).", ps...),
		logDropped:  counter("guest_log_lines_dropped_total", "Guest log lines dropped past the rate limit.", ps...),
		handlerErrors: counter("handler_errors_total", "Failed handler calls (every attempt), by kind.",
			"projection", "shard", "kind"),
		replays: counter("dead_letter_replays_total", "Dead-letter replays by result (ok, failed).",
			"projection", "shard", "result"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "projhost", Name: "handler_duration_seconds",
			Help: "Time of the handler call(s) of each accepted batch, retries excluded.", Buckets: DurationBuckets}, []string{"projection"}),
		lagEvents:  gauge("shard_lag_events", "Events after the last one read, at the last read (absent: unknown).", ps...),
		lagSeconds: gauge("shard_lag_seconds", "Seconds the last event read is behind the shard's tip, at the last read (absent: unknown).", ps...),
		paused:     gauge("shard_paused", "1 while this worker holds the shard's lease and the shard is paused (projhost pause): it reads nothing, and its lag is unknown.", ps...),
		memory:     gauge("shard_memory_bytes", "Linear memory of the shard's handler instance after its last batch.", ps...),
		moduleInfo: gauge("shard_module_info", "1 for the handler module (name, registry version) the shard runs.",
			"projection", "shard", "module", "version"),
		leasesHeld:     gauge("leases_held", "Shard leases this worker holds.", "projection"),
		leasesAcquired: counter("leases_acquired_total", "Shard leases acquired, by how (free, expired, steal, retake).", "projection", "how"),
		leasesLost:     counter("leases_lost_total", "Shard leases lost.", "projection"),
		held:           map[string]map[string]int64{},
		ended:          map[shardKey]int64{},
		module:         map[shardKey][2]string{},
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.batches, m.mutations, m.deadLetters, m.stops, m.saves, m.logDropped,
		m.handlerErrors, m.replays, m.duration, m.lagEvents, m.lagSeconds, m.memory, m.moduleInfo, m.paused,
		m.leasesHeld, m.leasesAcquired, m.leasesLost}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Hooks returns the hooks that feed m; chain them with others (projection.Chain). Every call
// returns hooks feeding the same metrics.
func (m *Metrics) Hooks() projection.Hooks {
	return projection.Hooks{
		Batch: m.batch,
		Flush: func(i projection.FlushInfo) { m.saves.WithLabelValues(i.Projection, i.ShardID).Inc() },
		HandlerError: func(i projection.HandlerErrorInfo) {
			m.handlerErrors.WithLabelValues(i.Projection, i.ShardID, i.Kind).Inc()
		},
		DeadLettered: func(l deadletter.Letter) { m.deadLetters.WithLabelValues(l.Projection, l.ShardID).Inc() },
		Replayed:     m.replayed,
		Stopped:      func(i projection.ShardInfo, _ string) { m.stops.WithLabelValues(i.Projection, i.ShardID).Inc() },
		Lag:          m.lag,
		LogDropped: func(i projection.LogDroppedInfo) {
			m.logDropped.WithLabelValues(i.Projection, i.ShardID).Add(float64(i.Lines))
		},
		Module: m.moduleChanged,
		Lease:  m.lease,
	}
}

func (m *Metrics) batch(i projection.BatchInfo) {
	p, s := i.Projection, i.ShardID
	m.events.WithLabelValues(p, s).Add(float64(i.Events))
	m.batches.WithLabelValues(p, s).Inc()
	m.mutations.WithLabelValues(p, s).Add(float64(i.Mutations))
	m.duration.WithLabelValues(p).Observe(i.Duration.Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current(i.ShardInfo) {
		m.memory.WithLabelValues(p, s).Set(float64(i.MemoryBytes))
	}
}

func (m *Metrics) replayed(l deadletter.Letter, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.replays.WithLabelValues(l.Projection, l.ShardID, result).Inc()
}

// current reports whether a shard gauge may be set from a report of i's acquisition: one that
// ended (a report arriving after its lease was lost) must not bring the series back. m.mu held.
func (m *Metrics) current(i projection.ShardInfo) bool {
	e, ok := m.ended[shardKey{i.Projection, i.ShardID}]
	return !ok || i.Epoch > e
}

func (m *Metrics) lag(i projection.LagInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.current(i.ShardInfo) {
		return
	}
	p, s := i.Projection, i.ShardID
	if i.EventsBehind >= 0 {
		m.lagEvents.WithLabelValues(p, s).Set(float64(i.EventsBehind))
	} else {
		m.lagEvents.DeleteLabelValues(p, s)
	}
	if i.MillisBehind >= 0 {
		m.lagSeconds.WithLabelValues(p, s).Set(float64(i.MillisBehind) / 1000)
	} else {
		m.lagSeconds.DeleteLabelValues(p, s)
	}
}

func (m *Metrics) moduleChanged(i projection.ModuleInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.current(i.ShardInfo) {
		return
	}
	k := shardKey{i.Projection, i.ShardID}
	if old, ok := m.module[k]; ok {
		m.moduleInfo.DeleteLabelValues(i.Projection, i.ShardID, old[0], old[1])
	}
	version := ""
	if n := deploy.VersionOf(i.Module); n > 0 {
		version = strconv.FormatInt(n, 10)
	}
	m.module[k] = [2]string{i.Module, version}
	m.moduleInfo.WithLabelValues(i.Projection, i.ShardID, i.Module, version).Set(1)
}

func (m *Metrics) lease(i projection.LeaseInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, s := i.Projection, i.ShardID
	held := m.held[p]
	if held == nil {
		held = map[string]int64{}
		m.held[p] = held
	}
	switch i.Event {
	case projection.LeaseAcquired:
		m.leasesAcquired.WithLabelValues(p, i.How).Inc()
		held[s] = i.Epoch
	case projection.LeasePaused:
		if ep, ok := held[s]; ok && ep == i.Epoch {
			// The owner reads nothing while paused: its last lag would go stale (a backlog
			// growing behind a lag of 0). Unknown until it reads again.
			m.paused.WithLabelValues(p, s).Set(1)
			m.lagEvents.DeleteLabelValues(p, s)
			m.lagSeconds.DeleteLabelValues(p, s)
		}
	case projection.LeaseResumed:
		if ep, ok := held[s]; ok && ep == i.Epoch {
			m.paused.DeleteLabelValues(p, s)
		}
	case projection.LeaseLost, projection.LeaseReleased, projection.LeaseFinished:
		if i.Event == projection.LeaseLost {
			m.leasesLost.WithLabelValues(p).Inc()
		}
		if ep, ok := held[s]; ok && ep == i.Epoch {
			delete(held, s)
		}
		k := shardKey{p, s}
		if i.Epoch > m.ended[k] {
			m.ended[k] = i.Epoch
		}
		if _, ok := held[s]; !ok { // not re-acquired meanwhile: this worker no longer runs it
			m.lagEvents.DeleteLabelValues(p, s)
			m.lagSeconds.DeleteLabelValues(p, s)
			m.memory.DeleteLabelValues(p, s)
			m.paused.DeleteLabelValues(p, s)
			if old, ok := m.module[k]; ok {
				m.moduleInfo.DeleteLabelValues(p, s, old[0], old[1])
				delete(m.module, k)
			}
		}
	}
	m.leasesHeld.WithLabelValues(p).Set(float64(len(held)))
}
