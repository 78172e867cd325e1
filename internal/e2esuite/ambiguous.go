package e2esuite

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

// AmbiguousRun is one run of the Ambiguous scenario: the fault the proxy between the workers
// and the store applies to every Every-th write (Kind Pass: none, the baseline).
type AmbiguousRun struct {
	Name  string
	Kind  faultproxy.Kind
	Every int
}

// AmbiguousRuns are the runs of issue 9's "Must show": apply-then-500 on every 7th and every
// 3rd write, apply-then-drop on every 7th, then the baseline without faults that the
// throughput ratios are taken against. The baseline comes last so that a server still warming
// up (DynamoDB Local's JVM) slows a fault run, not the baseline: the ratios err low.
func AmbiguousRuns() []AmbiguousRun {
	return []AmbiguousRun{
		{Name: "apply-then-500 every 7th write", Kind: faultproxy.ApplyThen500, Every: 7},
		{Name: "apply-then-500 every 3rd write", Kind: faultproxy.ApplyThen500, Every: 3},
		{Name: "apply-then-drop every 7th write", Kind: faultproxy.ApplyThenDrop, Every: 7},
		{Name: "no faults", Kind: faultproxy.Pass},
	}
}

// Scenario parameters (ambiguous runs).
const (
	ambShards  = 4
	ambFlights = 10000
	ambChunks  = 10
	ambPause   = 200 * time.Millisecond // between appended chunks
	// ambLease is the workers' --lease-duration: the default. With half of it (3 s) a renewal
	// whose retries meet fault after fault at every 3rd write sometimes completes after the
	// lease duration on a loaded 2-core machine (the worker hands the lease back and takes it
	// again): a slow store, not the failure of issue 9.
	ambLease = shardmap.DefaultLeaseDuration
	// ambCaughtUp bounds a run's wait for every cursor at its head: a guard against the
	// livelock of issue 9 (the figures are never asserted).
	ambCaughtUp = 3 * time.Minute
)

// ambFlags are the workers' `run` flags: the lease; cursor saves every 5 s (bulkFlags),
// so that each document is read and written fewer times (a local server does a few hundred
// requests a second).
var ambFlags = append([]string{"--lease-duration", ambLease.String()}, bulkFlags...)

// Ambiguous is the process-level scenario of issue 9 (DynamoDB writes whose outcome is
// unknown) against b, whose store must be reached over HTTP (Faulty; skipped otherwise). Each
// run of runs (AmbiguousRuns) has its own journal of ambShards shards and its own tables; two
// `projhost run` workers reach the store through an internal/faultproxy started here, which
// applies the run's fault to every Every-th write (PutItem, UpdateItem, DeleteItem) of either
// worker from their start to their stop: the write is applied and the worker gets a 500 or a
// dropped connection. Once the workers hold 2 shards each, ambFlights flights are appended in
// ambChunks chunks. Each run then requires:
//
//   - the read model exact, every polled cursor (read directly, not through the proxy)
//     monotonic, the trace history rules (Env.Finish);
//   - every shard's cursor monotonic across epochs in the traces (checkTraceCursors);
//   - every lease a worker lost taken by the other worker, as a steal or as expired, around
//     that time (checkLossesExplained): a worker that drops a lease because its own write's
//     retry failed the condition is the failure of issue 9;
//   - faults injected (Faults() > 0), lease writes among them, most of them on writes the
//     store applied (status 200).
//
// It logs, asserting none of them (the machine is shared), each run's events/s from the first
// append to caught-up and its ratio to the events/s of the run without faults (Kind Pass; the
// same workers through the same proxy), issue 9's target being at least 0.5.
func Ambiguous(t *testing.T, bin string, b Backend, runs []AmbiguousRun) {
	rates := map[string]float64{}
	for _, r := range runs {
		t.Run(r.Name, func(t *testing.T) {
			if rate, ok := ambiguousRun(t, newEnv(t, bin, b, Journal()), r); ok {
				rates[r.Name] = rate
			}
		})
	}
	i := slices.IndexFunc(runs, func(r AmbiguousRun) bool { return r.Kind == faultproxy.Pass })
	if i < 0 {
		return
	}
	base, ok := rates[runs[i].Name]
	if !ok {
		return
	}
	for _, r := range runs {
		if rate, ok := rates[r.Name]; ok && r.Kind != faultproxy.Pass {
			t.Logf("%s: %s: %.0f events/s, %.2f of the %.0f events/s without faults (target >= 0.5)", b.Name, r.Name, rate, rate/base, base)
		}
	}
}

// ambiguousRun runs r in e and returns its events/s; ok is false when it failed.
func ambiguousRun(t *testing.T, e *Env, r AmbiguousRun) (rate float64, ok bool) {
	fy, isFaulty := e.Store.(Faulty)
	if !isFaulty {
		t.Skip("the store is not reached over HTTP: no write of unknown outcome to inject")
	}
	fs := flights(t)[:ambFlights]
	e.Create(ambShards)
	p, err := faultproxy.Start(fy.Target())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	faults := &faultLog{}
	p.OnFault(faults.add)
	p.SetRule(faultproxy.Rule{Kind: r.Kind, Every: r.Every})

	spec := Spec{Flags: ambFlags, Store: fy.FlagsVia(p.Addr())}
	ws := []*Worker{e.Start("w1", spec), e.Start("w2", spec)}
	half := ambShards / 2
	e.WaitOwners(fmt.Sprintf("%d/%d", half, half), 2*time.Minute, func(m map[string]int) bool { return m["w1"] == half && m["w2"] == half })
	start := time.Now()
	appended := e.AppendChunks(fs, ambChunks, ambPause)
	caughtUp := waitUntil(ambCaughtUp, func() bool {
		select {
		case <-appended: // every chunk is in: the heads are final
			return len(e.Lagging()) == 0
		default:
			return false
		}
	})
	elapsed := time.Since(start)
	if !caughtUp {
		// Say why before failing: the lease losses are the likely cause (issue 9's livelock).
		checkLossesExplained(t, ws, faults)
		t.Fatalf("not caught up %s after the first append: %s", ambCaughtUp, strings.Join(e.Lagging(), ", "))
	}
	for _, w := range ws {
		w.Stop(t)
	}

	e.Finish(fs)
	checkTraceCursors(t, ws)
	explained := checkLossesExplained(t, ws, faults)
	fl := p.Faults()
	applied := 0
	for _, f := range fl {
		if f.Status == 200 {
			applied++
		}
	}
	// A faulted write the server refused (status 400) is mostly the SDK's retry of a
	// conditional write that was applied before (its condition no longer holds), itself faulted
	// again at the same rate: at every 3rd write about half of the faulted ones are such retries
	// (seen: 1,125 of 2,444 applied on DynamoDB Local). A quarter applied shows the workers met
	// many writes of unknown outcome.
	if r.Kind != faultproxy.Pass && (len(fl) == 0 || 4*applied <= len(fl) || faults.count("leases") == 0) {
		t.Errorf("the proxy faulted %d writes (%s), %d of them applied (status 200): want some, lease writes among them, at least a quarter of them applied",
			len(fl), faults.byTable(), applied)
	}
	rate = float64(len(fs)) / elapsed.Seconds()
	t.Logf("%s: %d events caught up %s after the first append: %.0f events/s; %d of %d requests faulted (%d applied: %s); %d lease losses, each explained by the other worker's take",
		r.Name, len(fs), elapsed.Round(10*time.Millisecond), rate, len(fl), p.Stats().Requests, applied, faults.byTable(), explained)
	return rate, !t.Failed()
}

// waitUntil polls cond every 100 ms until it holds (true) or d has passed (false).
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// faultLog records when the proxy faulted which write.
type faultLog struct {
	mu sync.Mutex
	fs []timedFault
}

type timedFault struct {
	at time.Time
	faultproxy.Fault
}

func (l *faultLog) add(f faultproxy.Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fs = append(l.fs, timedFault{time.Now().UTC(), f})
}

// clock formats a trace or fault time (UTC, as the traces record it).
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// table is a table name without the case's prefix ("leases", "cursors", ...).
func table(name string) string { return name[strings.LastIndexByte(name, '-')+1:] }

// count is the number of faults of writes to table (unprefixed).
func (l *faultLog) count(tbl string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.fs {
		if table(f.Request.Table) == tbl {
			n++
		}
	}
	return n
}

// byTable counts the faults by operation and table ("none" without faults).
func (l *faultLog) byTable() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[string]int{}
	for _, f := range l.fs {
		n[f.Request.Op+" "+table(f.Request.Table)]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(out, ", ")
}

// around lists the faults of writes to table (unprefixed) between from and to.
func (l *faultLog) around(tbl string, from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.fs {
		if table(f.Request.Table) == tbl && !f.at.Before(from) && !f.at.After(to) {
			out = append(out, fmt.Sprintf("%s %s %s %s: server status %d", clock(f.at), f.Kind, f.Request.Op, tbl, f.Status))
		}
	}
	return out
}

// checkLossesExplained fails t for every lease a worker of ws lost that no other worker took
// from it around that time, and returns how many losses were explained. A loss of shard S at
// epoch E by worker W at time T is explained by another worker's acquisition of S at a newer
// epoch, from W, as a steal or as expired, traced between T - ambLease and T + ambLease/2: a
// thief writes the lease first and W sees it at its next renewal (a third of a lease later),
// or the lease expired on both clocks. A worker that wrongly gives up a lease it still holds
// (its own retried write failed the condition) leaves it to expire: the other takes it at the
// earliest a lease duration later, outside the window.
func checkLossesExplained(t *testing.T, ws []*Worker, faults *faultLog) (explained int) {
	t.Helper()
	const detailed = 3 // losses printed with the records and faults around them
	unexplained := 0
	recs := make([][]projection.TraceRecord, len(ws))
	for i, w := range ws {
		recs[i] = w.Records(t)
	}
	for i, w := range ws {
		for _, lost := range Where(recs[i], Is("lease", string(projection.LeaseLost))) {
			from, to := lost.Time.Add(-ambLease), lost.Time.Add(ambLease/2)
			if lossExplained(ws, recs, i, lost) {
				explained++
				continue
			}
			unexplained++
			msg := fmt.Sprintf("self-inflicted lease loss: %s lost %s epoch %d at %s (%q) and no other worker took it from %s between %s and %s",
				w.ID, lost.Shard, lost.Epoch, clock(lost.Time), lost.Error, w.ID, clock(from), clock(to))
			if unexplained <= detailed {
				msg += fmt.Sprintf(".\nLease records of %s from %s to %s:\n%s\nLease writes faulted in the %s before:\n  %s",
					lost.Shard, clock(lost.Time.Add(-2*ambLease)), clock(lost.Time.Add(2*ambLease)),
					shardRecords(ws, recs, lost.Shard, lost.Time.Add(-2*ambLease), lost.Time.Add(2*ambLease)),
					2*ambLease, strings.Join(faults.around("leases", lost.Time.Add(-2*ambLease), lost.Time), "\n  "))
			}
			t.Error(msg)
		}
	}
	return explained
}

// lossExplained reports whether the loss lost, a record of ws[i] (recs[i] its records), is
// explained by another worker's acquisition of the shard at a newer epoch from ws[i], as a steal
// or as expired, between lost.Time - ambLease and lost.Time + ambLease/2 (checkLossesExplained).
func lossExplained(ws []*Worker, recs [][]projection.TraceRecord, i int, lost projection.TraceRecord) bool {
	from, to := lost.Time.Add(-ambLease), lost.Time.Add(ambLease/2)
	took := func(a projection.TraceRecord) bool {
		return a.Event == "lease" && a.Kind == string(projection.LeaseAcquired) && a.Shard == lost.Shard &&
			a.Epoch > lost.Epoch && a.From == ws[i].ID && (a.How == shardmap.HowSteal || a.How == shardmap.HowExpired) &&
			!a.Time.Before(from) && !a.Time.After(to)
	}
	for j := range ws {
		if j != i && slices.ContainsFunc(recs[j], took) {
			return true
		}
	}
	return false
}

// shardRecords formats the lease and open records of shard between from and to, of every
// worker, in time order.
func shardRecords(ws []*Worker, recs [][]projection.TraceRecord, shard string, from, to time.Time) string {
	type line struct {
		at time.Time
		s  string
	}
	var ls []line
	for i, w := range ws {
		for _, r := range recs[i] {
			if r.Shard != shard || (r.Event != "lease" && r.Event != "open") || r.Time.Before(from) || r.Time.After(to) {
				continue
			}
			s := fmt.Sprintf("  %s %s %s epoch %d", clock(r.Time), w.ID, r.Event, r.Epoch)
			if r.Kind != "" {
				s += " " + r.Kind
			}
			if r.How != "" {
				s += fmt.Sprintf(" (%s from %q)", r.How, r.From)
			}
			if r.Event == "open" || r.Seq != "" {
				s += fmt.Sprintf(" at %q", r.Seq)
			}
			if r.Error != "" {
				s += ": " + r.Error
			}
			ls = append(ls, line{r.Time, s})
		}
	}
	sort.SliceStable(ls, func(a, b int) bool { return ls[a].at.Before(ls[b].at) })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.s
	}
	return strings.Join(out, "\n")
}

// checkTraceCursors fails t unless, per shard, the cursors of the workers' open and flush
// records never go backwards in lease order: by epoch, then in the order of the one worker
// that held the epoch (History.Check covers each acquisition alone and saves past a newer
// claim; this adds a newer epoch opening behind an older one's save).
func checkTraceCursors(t *testing.T, ws []*Worker) {
	t.Helper()
	type point struct {
		epoch  int64
		order  int
		worker string
		event  string
		seq    string
	}
	byShard := map[string][]point{}
	for _, w := range ws {
		for i, r := range w.Records(t) {
			if r.Event == "open" || (r.Event == "flush" && r.Replay == "") {
				byShard[r.Shard] = append(byShard[r.Shard], point{r.Epoch, i, w.ID, r.Event, r.Seq})
			}
		}
	}
	for shard, ps := range byShard {
		sort.SliceStable(ps, func(a, b int) bool {
			if ps[a].epoch != ps[b].epoch {
				return ps[a].epoch < ps[b].epoch
			}
			return ps[a].order < ps[b].order
		})
		for k := 1; k < len(ps); k++ {
			if cmpSeq(ps[k].seq, ps[k-1].seq) < 0 {
				t.Errorf("%s: the traced cursor went backwards: %s %s epoch %d at %q, then %s %s epoch %d at %q",
					shard, ps[k-1].worker, ps[k-1].event, ps[k-1].epoch, ps[k-1].seq, ps[k].worker, ps[k].event, ps[k].epoch, ps[k].seq)
			}
		}
	}
}
