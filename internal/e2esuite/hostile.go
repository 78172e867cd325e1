package e2esuite

// The hostile-module process suite (issue 8, "Must show"): one real `projhost run` worker over
// HostileShards shards, with the handler testdata/hostile.wat. Every event is handled normally
// (put events/<shard>/<seq> = its data) except the misbehaving ones of the case, all on one
// shard: a memory bomb, a runaway loop (with the batch deadline, SIGTERM during it, under
// --trusted), a 1,000,000-mutation output, a log flood, documents DynamoDB refuses. While the misbehaving event is handled, healthy events keep
// arriving on every shard. Each case then checks, with the bounds below:
//
//   - the worker's RSS (VmRSS sampled from /proc/PID/status every rssPoll, and VmHWM) stays
//     under RSSBound;
//   - the healthy shards keep progressing: every chunk of healthy events appended during the
//     misbehaviour is handled (a trace batch record reaching it) within ProgressBound, and every
//     healthy shard ends at its head;
//   - the worker keeps every lease (no lease lost record in its trace);
//   - SIGTERM makes it exit 0 within SIGTERMBound;
//   - the misbehaving event ends as the case's Outcome says (a dead letter of the right error
//     kind with --on-error dead-letter, a STOPPED shard with the default stop, handled, or
//     never finished), read through `projhost deadletters list --json` and `projhost status
//     --json`;
//   - the read model holds exactly the documents of the events handled.
//
// Every case logs its figures (one line, "figures: ..."), whether it passes or not, and appends
// them as a JSON line to $PROJHOST_HOSTILE_FIGURES when set: the "before" and "after" tables of
// issue 8 come from there.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source/journal"
)

// Bounds and shape of the hostile suite.
const (
	// HostileShards is the journal's shard count; the misbehaving events are on shard
	// hostileShardIndex, the other shards are the healthy ones.
	HostileShards     = 4
	hostileShardIndex = 1

	// HostileMemoryLimit is the per-projection guest memory limit the suite runs with
	// (`run --memory-limit 256MiB`, issue 8 item 1).
	HostileMemoryLimit = 256 << 20
	// RSSOverhead is what a worker of HostileShards shards may use besides one instance's full
	// guest memory: the Go runtime, wazero's compiled code, the other instances, the SQLite page
	// cache and the decoded output of a batch. A worker of this suite whose misbehaving event
	// costs no memory (log flood, documents) peaks at 25-35 MiB (VmHWM, embedded store and
	// DynamoDB); 192 MiB leaves room for a batch's decoded output and the collector's headroom
	// (GOGC=100 lets the heap reach twice what is live).
	RSSOverhead = 192 << 20
	// RSSBound is the bound on the worker's VmRSS and VmHWM in every case: one guest memory at
	// the limit plus the overhead (448 MiB).
	RSSBound = HostileMemoryLimit + RSSOverhead
	// RSSCeiling: past it the suite kills the worker (SIGKILL) to protect the shared machine;
	// the case fails saying so.
	RSSCeiling = 6 << 30

	// SIGTERMBound is how long a worker may take to exit after SIGTERM: the batch deadline (5 s,
	// host.DefaultBatchDeadline), which bounds the batch a graceful stop finishes, plus 5 s for
	// its last commits, cursor saves and lease releases.
	SIGTERMBound = 10 * time.Second
	// exitGuard: a worker not gone this long after SIGTERM is killed (the case fails).
	exitGuard = 3 * SIGTERMBound
	// ProgressBound is how long a healthy shard may take to handle a chunk of events appended
	// while the misbehaving event is handled: the default lease duration (6 s) plus 4 s for a
	// loaded machine; a shard stalled longer than its lease is as good as lost.
	ProgressBound = 10 * time.Second
	// LogBound bounds the worker's log output (stdout and stderr, bytes) over a log flood case:
	// 200,000 guest lines of 1000 bytes are 200 MB unbounded.
	LogBound = 4 << 20

	// LogDroppedEvent is the trace record (`run --trace`) of guest log lines dropped by the rate
	// limit (issue 8 item 4), with the count in its field LogDroppedField.
	LogDroppedEvent = "log_dropped"
	LogDroppedField = "dropped"

	// hostileMaxAttempts is --max-attempts: few, each attempt of a memory bomb costs.
	hostileMaxAttempts = 2
	// endStateGuard bounds the wait for a case's end state (the worker then gets SIGTERM and the
	// case fails, saying what was missing); never asserted as a time.
	endStateGuard = 90 * time.Second
	// stallGuard: the wait also ends when no cursor moved for this long (a frozen worker).
	stallGuard = 3 * ProgressBound
	rssPoll    = 100 * time.Millisecond

	healthyKeys   = 40  // partition keys of the healthy events (spread over every shard)
	warmupEvents  = 400 // healthy events handled before the misbehaving ones
	flowChunks    = 8   // chunks of healthy events appended after the misbehaving ones
	flowChunkSize = 100 // events per chunk
	flowPause     = 500 * time.Millisecond
	hostileAlone  = time.Second // pause after the misbehaving events: they make a batch of their own
	hostileKey    = "k"         // the events' partition key field
)

// Outcome is how a case's misbehaving event ends.
type Outcome int

// Outcomes.
const (
	// Handled: handled like any other event (its document is in the read model); no dead
	// letter, no stop.
	Handled Outcome = iota
	// DeadLettered: with --on-error dead-letter, each misbehaving event is a dead letter of the
	// case's Kind, and its shard goes on to its head.
	DeadLettered
	// Stopped: with the default --on-error stop, the shard is STOPPED at the first misbehaving
	// event (`status`: STOPPED, the reason naming the Kind and the seq); its cursor stays just
	// before it.
	Stopped
	// Stuck: the event does not finish before SIGTERM (a runaway loop under --trusted, or one
	// signalled during it): no dead letter, no stop, its shard's cursor stays before it; SIGTERM
	// still ends the worker in time.
	Stuck
)

func (o Outcome) String() string {
	return [...]string{"handled", "dead letter", "stopped", "never finishes"}[o]
}

// HostileCase is one misbehaviour.
type HostileCase struct {
	Name string
	// Events are the misbehaving events' data (JSON objects; the suite adds the partition key
	// field "k"), appended at once to the hostile shard.
	Events []string
	// Flags are more `projhost run` flags.
	Flags   []string
	Outcome Outcome
	// Kind is the error kind (projection.Kind*) of a DeadLettered or Stopped outcome.
	Kind string
	// LogFlood: also require the log output under LogBound and dropped lines in the trace.
	LogFlood bool
	// StoreBound: what the case shows depends on the store (run it on every backend).
	StoreBound bool
	// SignalDuring: SIGTERM comes hostileAlone after the misbehaving events, while the handler
	// is still at them (no healthy flow, no end state to wait for).
	SignalDuring bool
	// StuckAtStop: the misbehaving shard is still in its batch at SIGTERM, and the graceful stop
	// interrupts it after the lease duration without saving (container.Runner): its lease is
	// reported lost ("worker stopping: ..."), which is then no failure; the healthy shards' are.
	StuckAtStop bool
}

// HostileCases are every case of the suite.
func HostileCases() []HostileCase {
	marker := func(mode string) []string { return []string{`{"hostile":"` + mode + `"}`} }
	return []HostileCase{
		{Name: "memory bomb, keep", Events: marker("keep"), Outcome: Handled},
		{Name: "memory bomb, trap, dead-letter", Events: marker("trap"), Outcome: DeadLettered, Kind: projection.KindTrap},
		{Name: "memory bomb, trap, stop", Events: marker("trap"), Outcome: Stopped, Kind: projection.KindTrap},
		{Name: "runaway loop, dead-letter", Events: marker("loop"), Outcome: DeadLettered, Kind: projection.KindDeadline},
		{Name: "runaway loop, SIGTERM during it", Events: marker("loop"), Outcome: Stuck, SignalDuring: true},
		{Name: "trusted runaway loop", Events: marker("loop"), Flags: []string{"--trusted"}, Outcome: Stuck, StuckAtStop: true},
		{Name: "1M-mutation output, dead-letter", Events: marker("million"), Outcome: DeadLettered, Kind: projection.KindBadOutput},
		{Name: "1M-mutation output, stop", Events: marker("million"), Outcome: Stopped, Kind: projection.KindBadOutput},
		{Name: "log flood", Events: marker("flood"), Outcome: Handled, LogFlood: true},
		{Name: "DynamoDB-hostile documents, dead-letter", Events: HostileDocuments(), Outcome: DeadLettered, Kind: projection.KindBadOutput, StoreBound: true},
		{Name: "DynamoDB-hostile documents, stop", Events: HostileDocuments(), Outcome: Stopped, Kind: projection.KindBadOutput, StoreBound: true},
	}
}

// StoreHostileCases are the cases whose outcome depends on the store (StoreBound).
func StoreHostileCases() []HostileCase {
	return slices.DeleteFunc(HostileCases(), func(c HostileCase) bool { return !c.StoreBound })
}

// HostileDocuments are the documents of issue 8 item 5 that SQLite accepts and DynamoDB refuses
// (DynamoDB limits: numbers of at most 38 digits of precision, between 1e-130 and 1e126; at
// most 32 levels of nesting; no empty attribute name), and one with a duplicate field name,
// which no store can keep as written. The suite expects the one document rule to reject every
// one of them as bad output, on every store: it is the only behaviour that is the same on all of
// them (SQLite's JSON functions read the first of duplicate names, Go's encoding/json the last).
func HostileDocuments() []string {
	return []string{
		`{"x":1e300}`,
		`{"n":123456789012345678901234567890123456789012345}`,
		strings.Repeat(`{"a":`, 39) + `{"deep":1}` + strings.Repeat(`}`, 39), // 40 levels
		`{"":1}`,
		`{"d":1,"d":2}`,
	}
}

// Hostile runs cases against b, each with its own journal, store and worker; bin is the projhost
// binary.
func Hostile(t *testing.T, bin string, b Backend, cases []HostileCase) {
	t.Helper()
	mod := hostileModule(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { runHostile(t, newEnv(t, bin, b, Journal()), mod, c) })
	}
}

// sent is an event the suite appended.
type sent struct {
	shard, seq, data string
	hostile          bool
}

// hostileRun is one case's state.
type hostileRun struct {
	e       *Env
	c       HostileCase
	n       map[string]int // events appended per shard
	events  []sent
	bad     string // the hostile shard
	badSeqs []string
	flow    []chunk // the healthy chunks appended after the misbehaving events
}

// chunk is when a chunk of healthy events was in the journal, and the heads it made.
type chunk struct {
	at    time.Time
	heads map[string]string
}

// HostileFigures are what a case measured.
type HostileFigures struct {
	Case        string  `json:"case"`
	Backend     string  `json:"backend"`
	MemoryLimit string  `json:"memory_limit"` // the --memory-limit passed
	MaxRSSMiB   float64 `json:"max_rss_mib"`  // the largest VmRSS sampled
	HWMMiB      float64 `json:"hwm_mib"`      // the last VmHWM read
	LeaseLost   int     `json:"lease_lost"`
	// MaxLatency is the longest a healthy shard took to handle a chunk appended during the
	// misbehaviour (seconds; -1: some chunk never handled).
	MaxLatency float64 `json:"max_healthy_latency_s"`
	// ExitAfter is the time from SIGTERM to exit (seconds; -1: not within the guard, killed).
	ExitAfter  float64 `json:"exit_after_sigterm_s"`
	ExitStatus string  `json:"exit_status"`
	Outcome    string  `json:"outcome"` // what became of the misbehaving events
	LogBytes   int64   `json:"log_bytes"`
	LogDropped int64   `json:"log_dropped"`
	Note       string  `json:"note,omitempty"` // the end state not reached, a kill at the RSS ceiling
}

func runHostile(t *testing.T, e *Env, mod string, c HostileCase) {
	e.Create(HostileShards)
	h := &hostileRun{e: e, c: c, n: map[string]int{}, bad: journal.ShardID(hostileShardIndex)}
	fig := HostileFigures{Case: c.Name, Backend: e.backend.Name, MaxLatency: -1, ExitAfter: -1}
	flags := append([]string{"--max-attempts", strconv.Itoa(hostileMaxAttempts)}, c.Flags...)
	if c.Outcome != Stopped {
		flags = append(flags, "--on-error", "dead-letter") // an unexpected failure then shows as a dead letter, not a stall
	}
	fig.MemoryLimit = fmt.Sprintf("%dMiB", HostileMemoryLimit>>20)
	flags = append(flags, "--memory-limit", fig.MemoryLimit)
	w := e.Start("hostile", Spec{HandlerPath: mod, Flags: flags})
	rss := sampleRSS(w)

	h.appendHealthy(0, warmupEvents)
	e.WaitCaughtUp(2 * time.Minute)
	h.appendHostile()
	time.Sleep(hostileAlone)
	if !c.SignalDuring {
		for i := range flowChunks {
			heads := h.appendHealthy(warmupEvents+i*flowChunkSize, flowChunkSize)
			h.flow = append(h.flow, chunk{at: time.Now(), heads: heads})
			time.Sleep(flowPause)
		}
		if missing := h.waitEnd(w); missing != "" {
			fig.Note = "end state not reached: " + missing
			t.Errorf("%s", fig.Note)
		}
	}

	// SIGTERM, unless the RSS ceiling killed the worker.
	if killed := rss.ceilingKill(); killed != "" {
		fig.Note = strings.TrimPrefix(fig.Note+"; "+killed, "; ")
		t.Errorf("%s", killed)
		<-w.done
	} else {
		sig := time.Now()
		signal(t, w, syscall.SIGTERM)
		select {
		case <-w.done:
			fig.ExitAfter = time.Since(sig).Seconds()
		case <-time.After(exitGuard):
			w.Kill(t)
			fig.Note = strings.TrimPrefix(fig.Note+"; no exit within "+exitGuard.String()+" of SIGTERM: killed", "; ")
		}
	}
	rss.close()
	fig.ExitStatus = exitStatus(w)
	fig.MaxRSSMiB, fig.HWMMiB = rss.mib()

	rs := w.Records(t)
	fig.LeaseLost = len(Where(rs, Is("lease", string(projection.LeaseLost))))
	fig.MaxLatency = h.maxLatency(rs)
	fig.LogBytes = w.OutputBytes()
	fig.LogDropped = logDropped(t, w)
	letters, status := e.Letters(), e.Status()
	fig.Outcome = h.outcome(rs, letters, status)
	h.report(t, fig)

	// The checks, every one reported.
	if fig.MaxRSSMiB > mib(RSSBound) || fig.HWMMiB > mib(RSSBound) {
		t.Errorf("worker RSS peaked at %.0f MiB (VmRSS) / %.0f MiB (VmHWM); the bound is %.0f MiB", fig.MaxRSSMiB, fig.HWMMiB, mib(RSSBound))
	}
	if lost := h.unexpectedLosses(rs); len(lost) > 0 {
		t.Errorf("the worker lost %d leases: %v", fig.LeaseLost, lost)
	}
	if fig.MaxLatency < 0 || fig.MaxLatency > ProgressBound.Seconds() {
		t.Errorf("healthy shards: a chunk appended during the misbehaviour took %s to be handled (-1: never); the bound is %s", secs(fig.MaxLatency), ProgressBound)
	}
	if fig.ExitAfter < 0 || fig.ExitAfter > SIGTERMBound.Seconds() || fig.ExitStatus != "0" {
		t.Errorf("after SIGTERM the worker exited in %s with status %s; want status 0 within %s", secs(fig.ExitAfter), fig.ExitStatus, SIGTERMBound)
	}
	if c.LogFlood {
		if fig.LogBytes > LogBound {
			t.Errorf("the worker wrote %d bytes of log in the flood; the bound is %d", fig.LogBytes, LogBound)
		}
		if fig.LogDropped == 0 {
			t.Errorf("no dropped guest log lines in the trace (%q records, field %q)", LogDroppedEvent, LogDroppedField)
		}
	}
	h.checkOutcome(t, rs, letters, status)
	h.checkReadModel(t)
	e.watch.check(t)     // no polled cursor moved backwards
	e.History().Check(t) // the trace's lease and cursor history holds (history.go)
}

// hostileModule assembles testdata/hostile.wat (once per test binary) into
// build/e2esuite/hostile.wasm and returns its path. Without node or the wabt npm package it
// fails when CI=true and skips otherwise.
func hostileModule(t *testing.T) string {
	t.Helper()
	hostileOnce.Do(func() {
		root := testwasm.RepoRoot(t)
		tmp, err := os.MkdirTemp("", "projhost-hostile-")
		if err != nil {
			hostileErr = err
			return
		}
		defer os.RemoveAll(tmp)
		if err := testwasm.AssembleWAT(t, tmp, filepath.Join(root, "internal", "e2esuite", "testdata", "hostile.wat")); err != nil {
			hostileErr, hostileSkip = err, errors.Is(err, testwasm.ErrNoWABT)
			return
		}
		// build/e2esuite/hostile.wasm, replaced atomically: test binaries may run at once.
		b, err := os.ReadFile(filepath.Join(tmp, "hostile.wasm"))
		dir := filepath.Join(root, "build", "e2esuite")
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		part := filepath.Join(dir, fmt.Sprintf(".hostile-%d.wasm", os.Getpid()))
		if err == nil {
			err = os.WriteFile(part, b, 0o644)
		}
		if err == nil {
			hostilePath = filepath.Join(dir, "hostile.wasm")
			err = os.Rename(part, hostilePath)
		}
		hostileErr = err
	})
	if hostileErr != nil {
		if hostileSkip && os.Getenv("CI") != "true" {
			t.Skipf("cannot assemble testdata/hostile.wat (%v); install node and run npm ci", hostileErr)
		}
		t.Fatalf("cannot assemble testdata/hostile.wat: %v", hostileErr)
	}
	return hostilePath
}

var (
	hostileOnce sync.Once
	hostilePath string
	hostileErr  error
	hostileSkip bool
)

// keyOn returns the first of prefix0, prefix1, ... that the journal puts on shard i.
func keyOn(prefix string, i int) string {
	for n := 0; ; n++ {
		if k := prefix + strconv.Itoa(n); journal.ShardFor(k, HostileShards) == i {
			return k
		}
	}
}

// appendHealthy appends n healthy events, numbered from first, over healthyKeys keys, and
// returns the heads after them.
func (h *hostileRun) appendHealthy(first, n int) map[string]string {
	h.e.t.Helper()
	data := make([]string, n)
	for i := range data {
		data[i] = fmt.Sprintf(`{"%s":"key-%d","i":%d}`, hostileKey, (first+i)%healthyKeys, first+i)
	}
	return h.append(data, false)
}

// appendHostile appends the case's misbehaving events on the hostile shard.
func (h *hostileRun) appendHostile() {
	h.e.t.Helper()
	k := keyOn("hostile-", hostileShardIndex)
	data := make([]string, len(h.c.Events))
	for i, d := range h.c.Events {
		data[i] = strings.TrimSuffix(d, "}") + fmt.Sprintf(`,"%s":%q}`, hostileKey, k)
	}
	before := h.n[h.bad]
	h.append(data, true)
	for i := range data {
		h.badSeqs = append(h.badSeqs, strconv.Itoa(before+i+1))
	}
}

// append appends data (JSON objects with the key field) as JSON lines, records each event's
// shard and seq, and returns the heads, checked against the journal's.
func (h *hostileRun) append(data []string, hostile bool) map[string]string {
	t := h.e.t
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "events-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	for _, d := range data {
		var v struct{ K string }
		if err := json.Unmarshal([]byte(d), &v); err != nil || v.K == "" {
			t.Fatalf("event %s: no key field %q (%v)", d, hostileKey, err)
		}
		id := journal.ShardID(journal.ShardFor(v.K, HostileShards))
		h.n[id]++
		h.events = append(h.events, sent{shard: id, seq: strconv.Itoa(h.n[id]), data: d, hostile: hostile})
		bw.WriteString(d)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	h.e.Projhost("journal", "append", "--data", h.e.Dir, "--key-field", hostileKey, f.Name())
	heads := h.e.Heads()
	for _, id := range h.e.Shards() {
		if want := h.n[id]; heads[id] != strconv.Itoa(want) && !(want == 0 && heads[id] == "") {
			t.Fatalf("shard %s: head %q after appending, want %d", id, heads[id], want)
		}
	}
	return heads
}

// healthy are the shards without misbehaving events.
func (h *hostileRun) healthy() []string {
	return slices.DeleteFunc(slices.Clone(h.e.Shards()), func(id string) bool { return id == h.bad })
}

// waitEnd waits for the case's end state: every healthy shard at its head, and the hostile
// shard at its head (Handled, DeadLettered) or stopped (Stopped). It returns "" once reached, or
// what is missing: at once when the worker exited, after stallGuard without any cursor moving,
// after endStateGuard in any case. Once a misbehaving event was handled as a healthy one where
// the outcome says it must not be, it waits for the healthy shards only and says so.
func (h *hostileRun) waitEnd(w *Worker) string {
	deadline := time.Now().Add(endStateGuard)
	var last, wrong string
	moved := time.Now()
	for {
		rs := w.Records(h.e.t)
		if n := h.handledBad(rs); n > 0 && h.c.Outcome != Handled && wrong == "" {
			wrong = fmt.Sprintf("%d misbehaving events handled as healthy ones (trace batch records): no %s will come", n, h.c.Outcome)
		}
		missing := []string{}
		if wrong != "" {
			missing = append(missing, wrong)
		}
		healthyLag := h.e.Lagging(h.healthy()...)
		if len(healthyLag) > 0 {
			missing = append(missing, "healthy shards lagging: "+strings.Join(healthyLag, ", "))
		}
		switch {
		case wrong != "":
		case h.c.Outcome == Handled || h.c.Outcome == DeadLettered:
			if l := h.e.Lagging(h.bad); len(l) > 0 {
				missing = append(missing, "the hostile shard lagging: "+strings.Join(l, ", "))
			}
		case h.c.Outcome == Stopped:
			if len(Where(rs, func(r projection.TraceRecord) bool { return r.Event == "stopped" && r.Shard == h.bad })) == 0 {
				missing = append(missing, "the hostile shard not stopped")
			}
		}
		switch {
		case len(missing) == 0:
			return ""
		case wrong != "" && len(healthyLag) == 0:
			return wrong
		}
		select {
		case <-w.done:
			return fmt.Sprintf("the worker exited (%s); %s", w.state(), strings.Join(missing, "; "))
		default:
		}
		if now := strings.Join(h.e.Lagging(), ", "); now != last {
			last, moved = now, time.Now()
		} else if time.Since(moved) > stallGuard {
			return fmt.Sprintf("no cursor moved for %s; %s", stallGuard, strings.Join(missing, "; "))
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not within %s: %s", endStateGuard, strings.Join(missing, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// handledBad counts the misbehaving events that trace batch records say were handled.
func (h *hostileRun) handledBad(rs []projection.TraceRecord) int {
	n := 0
	for _, r := range Where(rs, Is("batch")) {
		for _, s := range h.badSeqs {
			if r.Shard == h.bad && cmpSeq(r.FirstSeq, s) <= 0 && cmpSeq(s, r.LastSeq) <= 0 {
				n++
			}
		}
	}
	return n
}

// maxLatency is the longest time, in seconds, from a flow chunk being in the journal to a trace
// batch record of a healthy shard reaching the chunk's head on that shard; -1 when one never did.
func (h *hostileRun) maxLatency(rs []projection.TraceRecord) float64 {
	batches := Where(rs, Is("batch"))
	worst := 0.0
	prev := map[string]string{}
	for _, c := range h.flow {
		for _, id := range h.healthy() {
			head := c.heads[id]
			if head == prev[id] {
				continue // nothing new on this shard in this chunk
			}
			i := slices.IndexFunc(batches, func(r projection.TraceRecord) bool { return r.Shard == id && cmpSeq(r.LastSeq, head) >= 0 })
			if i < 0 {
				return -1
			}
			worst = max(worst, batches[i].Time.Sub(c.at).Seconds())
		}
		prev = c.heads
	}
	return worst
}

// outcome describes what became of the misbehaving events: the dead letters and error kinds,
// the stop, or where the hostile shard's cursor is.
func (h *hostileRun) outcome(rs []projection.TraceRecord, letters []Letter, status map[string]StatusRow) string {
	var parts []string
	kinds := map[string]int{}
	for _, l := range letters {
		kinds[l.ErrorKind]++
	}
	if len(letters) > 0 {
		parts = append(parts, fmt.Sprintf("%d dead letters %v", len(letters), kinds))
	}
	if r := status[h.bad]; r.State == "STOPPED" {
		parts = append(parts, "STOPPED: "+abbrev(r.Stopped, 100))
	}
	errKinds := map[string]int{}
	for _, r := range Where(rs, Is("handler_error")) {
		if r.Shard == h.bad {
			errKinds[r.Kind]++
		}
	}
	if len(errKinds) > 0 {
		parts = append(parts, fmt.Sprintf("handler errors %v", errKinds))
	}
	if handled := h.handledBad(rs); handled > 0 {
		parts = append(parts, fmt.Sprintf("handled (%d batch records)", handled))
	}
	parts = append(parts, fmt.Sprintf("cursor %q of head %q (first misbehaving seq %s)", status[h.bad].Cursor, status[h.bad].Head, h.badSeqs[0]))
	return strings.Join(parts, "; ")
}

// checkOutcome checks the misbehaving events' end, and that every healthy shard is at its head,
// neither stopped nor with dead letters.
func (h *hostileRun) checkOutcome(t *testing.T, rs []projection.TraceRecord, letters []Letter, status map[string]StatusRow) {
	t.Helper()
	for _, id := range h.healthy() {
		if r := status[id]; r.LagEvents != 0 || r.State == "STOPPED" || r.DeadLetters != 0 {
			t.Errorf("healthy shard %s: %+v; want no lag, not stopped, no dead letters", id, r)
		}
	}
	r := status[h.bad]
	first := h.badSeqs[0]
	before := strconv.FormatInt(mustInt(t, first)-1, 10)
	if before == "0" {
		before = ""
	}
	wantLetters := 0
	switch h.c.Outcome {
	case DeadLettered:
		wantLetters = len(h.badSeqs)
		for _, l := range letters {
			if l.Shard != h.bad || !slices.Contains(h.badSeqs, l.Seq) || l.ErrorKind != h.c.Kind || l.State != "failed" {
				t.Errorf("dead letter %s/%s: kind %s, state %s (%s); want a misbehaving event %s/%v, kind %s, failed", l.Shard, l.Seq, l.ErrorKind, l.State, abbrev(l.Error, 200), h.bad, h.badSeqs, h.c.Kind)
			}
		}
		if r.LagEvents != 0 || r.State == "STOPPED" {
			t.Errorf("the hostile shard: %+v; want it at its head, not stopped", r)
		}
	case Stopped:
		if want := "handler " + h.c.Kind + " at seq " + first + " "; r.State != "STOPPED" || !strings.HasPrefix(r.Stopped, want) || r.Cursor != before {
			t.Errorf("the hostile shard: %+v; want STOPPED, the reason starting %q, the cursor at %q", r, want, before)
		}
	case Stuck:
		if r.State == "STOPPED" || cmpSeq(r.Cursor, first) >= 0 {
			t.Errorf("the hostile shard: %+v; want it waiting before seq %s, not stopped", r, first)
		}
	case Handled:
		if r.LagEvents != 0 || r.State == "STOPPED" {
			t.Errorf("the hostile shard: %+v; want it at its head, not stopped", r)
		}
	}
	if len(letters) != wantLetters {
		t.Errorf("%d dead letters, want %d: %v", len(letters), wantLetters, letterKeys(letters))
	}
	if h.c.Outcome == Handled {
		for _, r := range Where(rs, Is("handler_error")) {
			t.Errorf("handler error on %s %s..%s: %s %s", r.Shard, r.FirstSeq, r.LastSeq, r.Kind, abbrev(r.Error, 200))
		}
	}
}

// checkReadModel requires the read model to hold exactly the documents of the events handled:
// events/<shard>/<seq> = the event's data (compared as JSON values), for every healthy event
// and, by the outcome, the misbehaving ones and what follows them on their shard.
func (h *hostileRun) checkReadModel(t *testing.T) {
	t.Helper()
	docs, err := h.e.Stores().ReadModel.Scan(t.Context(), Projection, "")
	if err != nil {
		t.Fatalf("scanning the read model: %v", err)
	}
	want := map[string]string{}
	for _, ev := range h.events {
		blocked := (h.c.Outcome == Stopped || h.c.Outcome == Stuck) && ev.shard == h.bad && cmpSeq(ev.seq, h.badSeqs[0]) >= 0
		if (ev.hostile && h.c.Outcome != Handled) || blocked {
			continue
		}
		want["events/"+ev.shard+"/"+ev.seq] = ev.data
	}
	extra := map[string]int{}
	var wrong []string
	for _, d := range docs {
		k := d.Collection + "/" + d.Key
		w, ok := want[k]
		if !ok {
			extra[d.Collection]++
			if len(extra) == 1 && extra[d.Collection] <= 3 {
				wrong = append(wrong, fmt.Sprintf("unexpected %s = %s", k, abbrev(string(d.Doc), 80)))
			}
			continue
		}
		delete(want, k)
		if !sameJSON(w, d.Doc) && len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf("%s = %s, want %s", k, abbrev(string(d.Doc), 80), abbrev(w, 80)))
		}
	}
	if len(want) > 0 || len(extra) > 0 || len(wrong) > 0 {
		var miss []string
		for k := range want {
			miss = append(miss, k)
		}
		slices.Sort(miss)
		t.Errorf("read model: %d documents missing %v, unexpected documents by collection %v, %v", len(miss), miss[:min(len(miss), 10)], extra, wrong)
		return
	}
	t.Logf("read model exact: %d documents", len(docs))
}

// report logs the figures and appends them to $PROJHOST_HOSTILE_FIGURES.
func (h *hostileRun) report(t *testing.T, fig HostileFigures) {
	t.Helper()
	b, _ := json.Marshal(fig)
	t.Logf("figures: %s", b)
	if p := os.Getenv("PROJHOST_HOSTILE_FIGURES"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("PROJHOST_HOSTILE_FIGURES: %v", err)
			return
		}
		defer f.Close()
		f.Write(append(b, '\n'))
	}
}

// logDropped sums the counts of the LogDroppedEvent records of w's trace (read as raw JSON:
// projection.TraceRecord may not have the field).
func logDropped(t *testing.T, w *Worker) int64 {
	t.Helper()
	b, err := os.ReadFile(w.Trace)
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r map[string]any
		if json.Unmarshal(line, &r) == nil && r["event"] == LogDroppedEvent {
			if v, ok := r[LogDroppedField].(float64); ok {
				n += int64(v)
			}
		}
	}
	return n
}

// rssSampler samples a worker's VmRSS and VmHWM from /proc/PID/status until it exits, killing it
// past RSSCeiling.
type rssSampler struct {
	mu       sync.Mutex
	rss, hwm int64 // bytes: the largest VmRSS seen, the last VmHWM read
	killed   string
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func sampleRSS(w *Worker) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	path := fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid)
	go func() {
		defer close(s.done)
		for {
			if rss, hwm, ok := readStatus(path); ok {
				s.mu.Lock()
				s.rss, s.hwm = max(s.rss, rss), max(s.hwm, hwm)
				if rss > RSSCeiling && s.killed == "" {
					s.killed = fmt.Sprintf("VmRSS reached %.0f MiB, past the ceiling of %.0f MiB: killed the worker", mib(rss), mib(RSSCeiling))
					_ = w.cmd.Process.Kill()
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-w.done:
				return
			case <-time.After(rssPoll):
			}
		}
	}()
	return s
}

// readStatus reads VmRSS and VmHWM (bytes) from a /proc/PID/status file.
func readStatus(path string) (rss, hwm int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, ok = v<<10, true
		case "VmHWM:":
			hwm = v << 10
		}
	}
	return rss, hwm, ok
}

func (s *rssSampler) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *rssSampler) ceilingKill() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

func (s *rssSampler) mib() (rss, hwm float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return mib(s.rss), mib(s.hwm)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func secs(s float64) string {
	if s < 0 {
		return "-1"
	}
	return fmt.Sprintf("%.2fs", s)
}

func exitStatus(w *Worker) string {
	select {
	case <-w.done:
	default:
		return "running"
	}
	if w.err == nil {
		return "0"
	}
	if ee, ok := w.err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return strconv.Itoa(ee.ExitCode())
	}
	return w.err.Error()
}

// unexpectedLosses are the lease losses of the run that fail it: every one, but for a
// StuckAtStop case the misbehaving shard's loss at the stop.
func (h *hostileRun) unexpectedLosses(rs []projection.TraceRecord) map[string]int {
	lost := leaseLosses(rs)
	if h.c.StuckAtStop {
		for k := range lost {
			if strings.HasPrefix(k, h.bad+": worker stopping") {
				delete(lost, k)
			}
		}
	}
	return lost
}

func leaseLosses(rs []projection.TraceRecord) map[string]int {
	out := map[string]int{}
	for _, r := range Where(rs, Is("lease", string(projection.LeaseLost))) {
		out[r.Shard+": "+abbrev(r.Error, 80)]++
	}
	return out
}

func letterKeys(ls []Letter) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Shard+"/"+l.Seq+" "+l.ErrorKind)
	}
	return out
}

func sameJSON(a string, b []byte) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
