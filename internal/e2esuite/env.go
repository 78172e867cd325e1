package e2esuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store"
)

// Projection is the name every case projects under.
const Projection = "flights"

// Env is one case's world: a stream (the journal in a data directory, or Kinesis), the
// backend's store, the workers started, and what the case observed.
type Env struct {
	t       *testing.T
	bin     string
	backend Backend
	Dir     string // --data: the journal (and the embedded store)
	Store   Store
	stream  stream
	initial []string // the shards Create made, in order
	shards  []string // guarded by mu (Reshard adds shards while the cursor watch reads them)

	stOnce sync.Once
	st     *store.Stores

	mu      sync.Mutex
	workers []*Worker
	watch   *cursorWatch
}

func newEnv(t *testing.T, bin string, b Backend, s Stream) *Env {
	t.Helper()
	dir := t.TempDir()
	e := &Env{t: t, bin: bin, backend: b, Dir: dir}
	e.Store = b.NewStore(t, dir, e.Projhost)
	e.stream = s.open(t, e)
	t.Cleanup(e.cleanup)
	return e
}

// Create makes the stream with n shards and starts watching the projection's cursors.
func (e *Env) Create(n int) {
	e.t.Helper()
	ids := e.stream.create(n)
	e.mu.Lock()
	e.initial = ids
	e.shards = slices.Clone(ids)
	e.mu.Unlock()
	e.watch = e.watchCursors()
}

// ShardAt is the i-th shard Create made (in hash key order).
func (e *Env) ShardAt(i int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.initial[i]
}

// Shards are the stream's shard ids, open and closed (parents before children).
func (e *Env) Shards() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.shards)
}

// Stores are the case's stores, opened in this process (once).
func (e *Env) Stores() *store.Stores {
	e.stOnce.Do(func() { e.st = e.Store.Open(e.t) })
	return e.st
}

// Projhost runs a projhost command to completion and returns its stdout; it fails the case
// when the command fails.
func (e *Env) Projhost(args ...string) string {
	e.t.Helper()
	out, errOut, err := e.run(args...)
	if err != nil {
		e.t.Fatalf("projhost %s: %v\nstderr (tail):\n%s", strings.Join(args, " "), err, tail(errOut, 30))
	}
	return out
}

// run runs a projhost command and returns stdout, stderr and its error.
func (e *Env) run(args ...string) (string, string, error) {
	cmd := exec.Command(e.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// With returns args followed by the case's stream flags (--data for the journal) and store
// flags (for the commands that take a store: run, status, query, deadletters, resume).
func (e *Env) With(args ...string) []string {
	return append(append(slices.Clone(args), e.stream.flags()...), e.Store.Flags()...)
}

// CLI runs a store command (With) and returns its stdout.
func (e *Env) CLI(args ...string) string {
	e.t.Helper()
	return e.Projhost(e.With(args...)...)
}

// Append appends flights as JSON lines, partition key origin; those at the indexes in quoted in
// the malformed form (flightcheck.Flight.QuotedJSON).
func (e *Env) Append(fs []flightcheck.Flight, quoted ...int) {
	e.t.Helper()
	e.Projhost(e.stream.appendArgs(e.flightsFile(fs, quoted...))...)
}

// AppendChunks appends fs in n chunks, pause apart, in the background; the channel closes
// when every chunk is in.
func (e *Env) AppendChunks(fs []flightcheck.Flight, n int, pause time.Duration) <-chan struct{} {
	e.t.Helper()
	files := make([]string, n)
	for i := range n {
		files[i] = e.flightsFile(fs[i*len(fs)/n : (i+1)*len(fs)/n])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, p := range files {
			if _, errOut, err := e.run(e.stream.appendArgs(p)...); err != nil {
				e.t.Errorf("append chunk %d: %v: %s", i, err, errOut)
				return
			}
			time.Sleep(pause)
		}
	}()
	return done
}

func (e *Env) flightsFile(fs []flightcheck.Flight, quoted ...int) string {
	e.t.Helper()
	f, err := os.CreateTemp(e.t.TempDir(), "flights-*.jsonl")
	if err != nil {
		e.t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i, fl := range fs {
		d := fl.JSON()
		if slices.Contains(quoted, i) {
			d = fl.QuotedJSON()
		}
		w.Write(d)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		e.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		e.t.Fatal(err)
	}
	return f.Name()
}

// Heads returns every shard's last sequence number ("" = empty).
func (e *Env) Heads() map[string]string {
	e.t.Helper()
	out, err := e.stream.heads(context.Background(), e.Shards())
	if err != nil {
		e.t.Fatalf("reading the stream's heads: %v", err)
	}
	return out
}

// Cursors reads every shard's cursor. A failed read is tried again for up to a minute: on a
// loaded 2-core machine a local server can take longer than one read's 10 s bound (seen:
// dynalite, with every process suite beside it).
func (e *Env) Cursors() map[string]cursorstore.Cursor {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := e.Store.Cursors(e.t, e.Stores(), Projection, e.Shards())
		if err == nil {
			return cs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reading cursors: %v", err)
		}
		e.t.Logf("reading cursors failed, trying again: %v", err)
		time.Sleep(time.Second)
	}
}

// Lagging returns the shards (among only, or all) whose cursor is not at the journal's head,
// with cursor and head.
func (e *Env) Lagging(only ...string) []string {
	e.t.Helper()
	heads, cs := e.Heads(), e.Cursors()
	var out []string
	for _, id := range e.Shards() {
		if len(only) > 0 && !slices.Contains(only, id) {
			continue
		}
		if cs[id].Seq != heads[id] {
			out = append(out, fmt.Sprintf("%s at %q of %q", id, cs[id].Seq, heads[id]))
		}
	}
	return out
}

// WaitCaughtUp waits until every shard's cursor is at the journal's head. It fails when no
// cursor moved for d (a stall: a shard nobody processes, a child never started), or after
// 3*d in all: on a loaded 2-core machine a lone worker can take minutes over its backlog
// (seen: a merge child still 1,100 events behind, and moving, 3 minutes after a kill -9 while
// other process suites ran), which is slowness, not the stall these waits are for.
func (e *Env) WaitCaughtUp(d time.Duration) {
	e.t.Helper()
	start := time.Now()
	last, moved := "", start
	for {
		l := e.Lagging()
		if len(l) == 0 {
			return
		}
		state := strings.Join(l, ", ")
		now := time.Now()
		if state != last {
			last, moved = state, now
		}
		switch {
		case now.Sub(moved) > d:
			e.t.Fatalf("no cursor moved for %s (%s in all); not at their shard's head: %s", d, now.Sub(start).Round(time.Second), state)
		case now.Sub(start) > 3*d:
			e.t.Fatalf("still not every cursor at its shard's head after %s (moving): %s", now.Sub(start).Round(time.Second), state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leases lists the projection's leases.
func (e *Env) leases() []shardmap.Lease {
	e.t.Helper()
	ls, err := e.Stores().Leases.List(context.Background(), Projection)
	if err != nil {
		e.t.Fatalf("listing leases: %v", err)
	}
	return ls
}

// Owners returns how many shards each worker holds (free leases are not counted).
func (e *Env) Owners() map[string]int {
	e.t.Helper()
	m := map[string]int{}
	for _, l := range e.leases() {
		if l.Owner != "" {
			m[l.Owner]++
		}
	}
	return m
}

// HeldBy returns the shards whose owner satisfies keep, with their epochs.
func (e *Env) HeldBy(keep func(owner string) bool) map[string]int64 {
	e.t.Helper()
	out := map[string]int64{}
	for _, l := range e.leases() {
		if keep(l.Owner) {
			out[l.ShardID] = l.Epoch
		}
	}
	return out
}

// Held returns the shards worker holds, with their epochs.
func (e *Env) Held(worker string) map[string]int64 {
	return e.HeldBy(func(owner string) bool { return owner == worker })
}

// WaitOwners waits until the lease owners satisfy ok and returns them.
func (e *Env) WaitOwners(what string, d time.Duration, ok func(map[string]int) bool) map[string]int {
	e.t.Helper()
	var m map[string]int
	e.Eventually(what, d, func() (bool, string) {
		m = e.Owners()
		return ok(m), fmt.Sprint(m)
	})
	return m
}

// Eventually polls cond until it holds. d only bounds a case that would otherwise hang: it is
// generous, and how long the wait took is never asserted.
func (e *Env) Eventually(what string, d time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("still not %s after %s: %s", what, d, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StatusRow is a row of `projhost status --json`.
type StatusRow = status.Row

// Status runs `projhost status --json` and returns its rows by shard.
func (e *Env) Status() map[string]StatusRow {
	e.t.Helper()
	out := map[string]StatusRow{}
	// --lease-duration 0: the suites read cursors and states, not liveness (no watching).
	for _, line := range lines(e.CLI("status", "--name", Projection, "--json", "--lease-duration", "0")) {
		var r StatusRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			e.t.Fatalf("status --json line %q: %v", line, err)
		}
		out[r.Shard] = r
	}
	return out
}

// Letter is a dead letter as `projhost deadletters list --json` prints it.
type Letter struct {
	Shard        string          `json:"shard"`
	Seq          string          `json:"seq"`
	PartitionKey string          `json:"partition_key"`
	State        string          `json:"state"`
	ErrorKind    string          `json:"error_kind"`
	Error        string          `json:"error"`
	Attempts     int             `json:"attempts"`
	ReplayedSeq  string          `json:"replayed_seq"`
	Data         json.RawMessage `json:"data"`
}

// Letters runs `projhost deadletters list --json`.
func (e *Env) Letters() []Letter {
	e.t.Helper()
	var out []Letter
	for _, line := range lines(e.CLI("deadletters", "list", "--name", Projection, "--json")) {
		var l Letter
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			e.t.Fatalf("deadletters list --json line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// CheckReadModel fails the case unless the read model equals flightcheck's computation over fs.
func (e *Env) CheckReadModel(fs []flightcheck.Flight) {
	e.t.Helper()
	docs, err := e.Stores().ReadModel.Scan(context.Background(), Projection, "")
	if err != nil {
		e.t.Fatalf("scanning the read model: %v", err)
	}
	flightcheck.Check(e.t, fs, docs)
}

// Finish ends a case whose workers are all stopped: the read model is exact over fs, no polled
// cursor moved backwards, and the workers' trace history holds (history.go).
func (e *Env) Finish(fs []flightcheck.Flight) {
	e.t.Helper()
	e.CheckReadModel(fs)
	e.t.Logf("read model exact (%d flights)", len(fs))
	e.checkHistory()
}

// checkHistory is Finish without the read model: no polled cursor moved backwards, and the
// workers' trace history holds.
func (e *Env) checkHistory() {
	e.t.Helper()
	polled := e.watch.check(e.t)
	h := e.History()
	h.Check(e.t)
	e.t.Logf("%d cursor values polled, %d cursor saves traced by %d workers; none backwards, none past a newer owner's claim",
		polled, h.Saves(), len(h.workers))
}

// seqIndex returns, for each index of fs, the shard id and sequence number its event gets when
// fs is appended at once to an empty journal of the case's shards.
func (e *Env) seqIndex(fs []flightcheck.Flight) (shard []string, seq []string) {
	n := map[string]int{}
	for _, f := range fs {
		id := journal.ShardID(journal.ShardFor(f.Origin, len(e.Shards())))
		n[id]++
		shard, seq = append(shard, id), append(seq, fmt.Sprint(n[id]))
	}
	return shard, seq
}

// poisonIndexes picks k indexes of fs, at or after from and spread over the list, whose events
// land on k different shards.
func (e *Env) poisonIndexes(fs []flightcheck.Flight, k int) []int {
	e.t.Helper()
	shard, _ := e.seqIndex(fs)
	var out []int
	used := map[string]bool{}
	for i := len(fs) / (k + 1); i < len(fs) && len(out) < k; i++ {
		if !used[shard[i]] && (len(out) == 0 || i-out[len(out)-1] >= len(fs)/(k+1)) {
			used[shard[i]] = true
			out = append(out, i)
		}
	}
	if len(out) < k {
		e.t.Fatalf("cannot find %d events on different shards", k)
	}
	return out
}

func without(fs []flightcheck.Flight, skip ...int) []flightcheck.Flight {
	var out []flightcheck.Flight
	for i, f := range fs {
		if !slices.Contains(skip, i) {
			out = append(out, f)
		}
	}
	return out
}

func (e *Env) cleanup() {
	e.mu.Lock()
	ws := slices.Clone(e.workers)
	e.mu.Unlock()
	for _, w := range ws {
		w.kill()
	}
	if e.t.Failed() {
		for _, w := range ws {
			e.t.Logf("--- worker %s (%s): stderr, last 40 lines ---\n%s", w.ID, w.state(), tail(w.Stderr(), 40))
		}
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// cmpSeq compares sequence numbers ("" is before every one).
func cmpSeq(a, b string) int { return event.CompareSeq(a, b) }

// signal sends sig to the process, failing the case when it cannot.
func signal(t *testing.T, w *Worker, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker %s: %v", sig, w.ID, err)
	}
}

// filepathIn returns the path of name in the case's own temp dir.
func (e *Env) filepathIn(name string) string { return filepath.Join(e.t.TempDir(), name) }
