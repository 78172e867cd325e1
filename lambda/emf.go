package lambda

// Lambda mode's metrics: one CloudWatch embedded-metric-format (EMF) line per invocation
// (Config.Metrics).

import (
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/projection"
)

// EMFNamespace is the CloudWatch namespace of the metrics in Config.Metrics' lines.
//
// At the end of every invocation with records, the Handler writes one line to Config.Metrics:
// a JSON object (CloudWatch embedded metric format) whose "_aws" member declares, with the
// invocation's end as Timestamp (ms), namespace "projhost", one dimension set [projection,
// shard] and the metrics below, and whose members "projection" and "shard" are the
// dimensions' values. Metrics (for this invocation):
//
//	Events           Count         events handled by the handler and accepted (the core's Batch hook)
//	Batches          Count         handler batches accepted
//	Mutations        Count         mutations the accepted batches returned
//	HandlerErrors    Count         failed handler calls (every attempt and bisection probe)
//	DeadLetters      Count         events stored as dead letters
//	CursorSaves      Count         commits of mutations and cursor (dead-letter replays' too)
//	HandlerDuration  Milliseconds  time of the handler calls of the accepted batches, retries excluded
//	LagEvents        Count         records of the batch left uncommitted, which the ESM delivers again
//	                               (Lambda mode cannot see the stream's tip: records past the batch are not counted)
//	LagMillis        Milliseconds  age at the invocation's end of the first record left uncommitted, or of the
//	                               batch's last record when all are committed (the ESM's IteratorAge, after the
//	                               work); absent when the records have no approximateArrivalTimestamp
//	MemoryBytes      Bytes         the handler instance's linear memory after the last batch; absent without one
//
// Other members (properties, searchable with CloudWatch Logs Insights): "module" (the handler
// module's name, "<projection> v<N>") and "version" (N) when a batch ran, and
// "handlerErrorKinds" (failed calls by projection.Kind*) when a call failed. Lines of
// concurrent invocations are written whole, one at a time; a write error is logged, never
// returned: metrics do not fail an invocation.
const EMFNamespace = "projhost"

// EMF metric names and their CloudWatch units: the figures container mode exports to
// Prometheus (package prom), per invocation. See Config.Metrics.
var emfMetrics = []struct{ name, unit string }{
	{"Events", "Count"},
	{"Batches", "Count"},
	{"Mutations", "Count"},
	{"HandlerErrors", "Count"},
	{"DeadLetters", "Count"},
	{"CursorSaves", "Count"},
	{"LagEvents", "Count"},
	{"LagMillis", "Milliseconds"},
	{"HandlerDuration", "Milliseconds"},
	{"MemoryBytes", "Bytes"},
}

// invocationFigures are one invocation's figures, gathered from the core's hooks.
type invocationFigures struct {
	events, batches, mutations, errors, dead, saves int64
	kinds                                           map[string]int64 // handler errors by projection.Kind*
	handler                                         time.Duration
	memory                                          uint64 // after the last batch; 0: no batch
	module                                          string // the module name that handled the batch
}

// emfRecorder gathers the figures of the invocations in progress, per shard (the ESM runs one
// invocation per shard at a time), and writes each invocation's line. Safe for concurrent use.
type emfRecorder struct {
	w   io.Writer
	now func() time.Time

	mu      sync.Mutex // guards byShard and the writes to w
	byShard map[string]*invocationFigures
}

func newEMFRecorder(w io.Writer) *emfRecorder {
	return &emfRecorder{w: w, now: time.Now, byShard: map[string]*invocationFigures{}}
}

// add applies f to the figures of shard's invocation.
func (e *emfRecorder) add(shard string, f func(*invocationFigures)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fig := e.byShard[shard]
	if fig == nil {
		fig = &invocationFigures{kinds: map[string]int64{}}
		e.byShard[shard] = fig
	}
	f(fig)
}

// hooks are the core's hooks that feed e.
func (e *emfRecorder) hooks() projection.Hooks {
	return projection.Hooks{
		Batch: func(i projection.BatchInfo) {
			e.add(i.ShardID, func(f *invocationFigures) {
				f.events += int64(i.Events)
				f.batches++
				f.mutations += int64(i.Mutations)
				f.handler += i.Duration
				f.memory = i.MemoryBytes
			})
		},
		Flush: func(i projection.FlushInfo) { e.add(i.ShardID, func(f *invocationFigures) { f.saves++ }) },
		HandlerError: func(i projection.HandlerErrorInfo) {
			e.add(i.ShardID, func(f *invocationFigures) { f.errors++; f.kinds[i.Kind]++ })
		},
		DeadLettered: func(l deadletter.Letter) { e.add(l.ShardID, func(f *invocationFigures) { f.dead++ }) },
		Module:       func(i projection.ModuleInfo) { e.add(i.ShardID, func(f *invocationFigures) { f.module = i.Module }) },
	}
}

// emit writes the EMF line of shard's invocation of records evs, whose committed cursor is
// committed, and forgets its figures. A write error is logged on log (metrics never fail an
// invocation).
func (e *emfRecorder) emit(log *slog.Logger, projectionName, shard string, evs []event.Event, committed string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fig := e.byShard[shard]
	delete(e.byShard, shard)
	if fig == nil {
		fig = &invocationFigures{}
	}
	line, err := emfLine(projectionName, shard, fig, evs, committed, e.now())
	if err == nil {
		_, err = e.w.Write(line)
	}
	if err != nil {
		log.Warn("writing the invocation's metrics (EMF) failed", "shard", shard, "err", err)
	}
}

// emfLine encodes an invocation's figures as one EMF JSON line (with its "\n").
func emfLine(projectionName, shard string, fig *invocationFigures, evs []event.Event, committed string, now time.Time) ([]byte, error) {
	root := map[string]any{
		"projection":      projectionName,
		"shard":           shard,
		"Events":          fig.events,
		"Batches":         fig.batches,
		"Mutations":       fig.mutations,
		"HandlerErrors":   fig.errors,
		"DeadLetters":     fig.dead,
		"CursorSaves":     fig.saves,
		"HandlerDuration": float64(fig.handler.Microseconds()) / 1000,
	}
	// Lag: the records of the batch left uncommitted (the ESM delivers them again), and the
	// age of the first of them, or of the batch's last record when all are committed.
	var left int64
	age := evs[len(evs)-1]
	for i := len(evs) - 1; i >= 0 && event.CompareSeq(evs[i].Seq, committed) > 0; i-- {
		left++
		age = evs[i]
	}
	root["LagEvents"] = left
	if age.ArrivalMs > 0 {
		root["LagMillis"] = max(now.UnixMilli()-age.ArrivalMs, 0)
	}
	if fig.memory > 0 {
		root["MemoryBytes"] = fig.memory
	}
	if fig.module != "" {
		root["module"] = fig.module
		if n := deploy.VersionOf(fig.module); n > 0 {
			root["version"] = strconv.FormatInt(n, 10)
		}
	}
	if len(fig.kinds) > 0 {
		root["handlerErrorKinds"] = fig.kinds
	}
	type metric struct {
		Name string
		Unit string
	}
	ms := make([]metric, 0, len(emfMetrics))
	for _, m := range emfMetrics {
		if _, ok := root[m.name]; ok {
			ms = append(ms, metric{m.name, m.unit})
		}
	}
	root["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  EMFNamespace,
			"Dimensions": [][]string{{"projection", "shard"}},
			"Metrics":    ms,
		}},
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
