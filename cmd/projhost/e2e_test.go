package main

// End-to-end tests with real projhost processes on a local journal and the embedded store:
// projection correctness, kill -9 crashes, lease balance, paused (SIGSTOP) workers and graceful
// handover. Every test ends by comparing the read model with the independent computation of
// internal/flightcheck and by checking that no cursor ever moved backwards.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "projhost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "projhost")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building projhost: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	stopDynalite()
	os.RemoveAll(dir)
	os.Exit(code)
}

// projhost runs the CLI to completion and returns its stdout; it fails the test on error.
func projhost(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("projhost %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// flights writes flights[lo:hi] as JSON lines into a temp file and returns its path.
func flightsFile(t *testing.T, fs []flightcheck.Flight) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flights.jsonl")
	f, err := os.Create(p)
	require.NoError(t, err)
	enc := json.NewEncoder(f)
	for _, fl := range fs {
		require.NoError(t, enc.Encode(fl))
	}
	require.NoError(t, f.Close())
	return p
}

// worker is one `projhost run` process.
type worker struct {
	id     string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

type lockedWriter struct{ w *worker }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.w.stderr.Write(p)
}

func (w *worker) log() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.String()
}

func startWorker(t *testing.T, id string, args ...string) *worker {
	t.Helper()
	return startWorkerWith(t, id, nil, args...)
}

// startWorkerWith starts `projhost run` under wrapper (a command line that runs the rest, e.g.
// unshare ... --fork; nil: none).
func startWorkerWith(t *testing.T, id string, wrapper []string, args ...string) *worker {
	t.Helper()
	w := &worker{id: id, done: make(chan error, 1)}
	argv := append(append(append([]string(nil), wrapper...), binPath, "run", "--worker-id", id, "--log-level", "debug"), args...)
	w.cmd = exec.Command(argv[0], argv[1:]...)
	w.cmd.Stderr = lockedWriter{w}
	w.cmd.Stdout = lockedWriter{w}
	require.NoError(t, w.cmd.Start())
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("--- log of worker %s ---\n%s", w.id, tail(w.log(), 60))
		}
	})
	return w
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// wait waits for the process to exit and returns its error.
func (w *worker) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-w.done:
		w.done <- err
		return err
	case <-time.After(d):
		t.Fatalf("worker %s did not exit within %s; log:\n%s", w.id, d, tail(w.log(), 40))
		return nil
	}
}

// openStores opens the stores that `projhost run --data dir STORE...` uses (store: extra store
// flags, e.g. --store dynamodb --dynamodb-endpoint URL --table-prefix P; none: the embedded store).
func openStores(t *testing.T, dir string, store []string) *stores {
	t.Helper()
	var sf storeFlags
	cmd := &cobra.Command{}
	sf.register(cmd)
	require.NoError(t, cmd.ParseFlags(append([]string{"--data", dir}, store...)))
	st, err := sf.open(context.Background())
	require.NoError(t, err)
	return st
}

// cursorWatch polls every shard's cursor and records every value it sees.
type cursorWatch struct {
	mu     sync.Mutex
	seen   map[string][]string
	epochs map[string]int64 // last epoch seen per shard
	bad    []string
	stop   chan struct{}
	done   chan struct{}
}

// cursorLister reads the cursors of every shard of a projection (missing shards may be absent).
type cursorLister func(ctx context.Context) (map[string]cursorstore.Cursor, error)

// watchCursors records every cursor value of the shards of projection name in the store of
// `--data dir STORE...` (polling every 5 ms; DynamoDB: one Query per poll) and flags any cursor
// that moves backwards or whose epoch goes down.
func watchCursors(t *testing.T, dir, name string, shards int, store ...string) *cursorWatch {
	t.Helper()
	var list cursorLister
	closeFn := func() {}
	if isDynamo(store) {
		list = dynamoCursors(t, store, name)
	} else {
		st, err := local.Open(dir)
		require.NoError(t, err)
		closeFn = func() { st.Close() }
		list = func(ctx context.Context) (map[string]cursorstore.Cursor, error) {
			out := map[string]cursorstore.Cursor{}
			for i := 0; i < shards; i++ {
				id := journal.ShardID(i)
				c, err := st.Cursors().Get(ctx, name, id)
				if err != nil {
					continue // busy: try again next round
				}
				out[id] = c
			}
			return out, nil
		}
	}
	cw := &cursorWatch{seen: map[string][]string{}, epochs: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(cw.done)
		defer closeFn()
		for {
			cs, err := list(context.Background())
			if err == nil {
				cw.record(cs)
			}
			select {
			case <-cw.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(cw.close)
	return cw
}

func (cw *cursorWatch) record(cs map[string]cursorstore.Cursor) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for id, c := range cs {
		if c.Epoch < cw.epochs[id] {
			cw.bad = append(cw.bad, fmt.Sprintf("%s epoch went down %d -> %d", id, cw.epochs[id], c.Epoch))
		}
		cw.epochs[id] = max(cw.epochs[id], c.Epoch)
		s := cw.seen[id]
		if len(s) == 0 || s[len(s)-1] != c.Seq {
			if len(s) > 0 && source.CompareSeq(c.Seq, s[len(s)-1]) < 0 {
				cw.bad = append(cw.bad, fmt.Sprintf("%s moved backwards %s -> %s", id, s[len(s)-1], c.Seq))
			}
			cw.seen[id] = append(s, c.Seq)
		}
	}
}

func (cw *cursorWatch) close() {
	select {
	case <-cw.stop:
	default:
		close(cw.stop)
	}
	<-cw.done
}

// check stops the watch and asserts no cursor moved backwards; it returns the number of
// distinct cursor values recorded.
func (cw *cursorWatch) check(t *testing.T) int {
	t.Helper()
	cw.close()
	cw.mu.Lock()
	defer cw.mu.Unlock()
	require.Empty(t, cw.bad, "cursors moved backwards")
	n := 0
	for _, s := range cw.seen {
		n += len(s)
	}
	return n
}

// readModel returns every document of projection name in the store of `--data dir STORE...`.
func readModel(t *testing.T, dir, name string, store ...string) []readmodel.Doc {
	t.Helper()
	st := openStores(t, dir, store)
	defer st.Close()
	docs, err := st.ReadModel.Scan(context.Background(), name, "")
	require.NoError(t, err)
	return docs
}

// status returns the status rows of projection name (`projhost status --data dir STORE...`).
func status(t *testing.T, dir, name string, store ...string) []shardStatus {
	t.Helper()
	out := projhost(t, append([]string{"status", "--data", dir, "--name", name, "--json"}, store...)...)
	var rows []shardStatus
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r shardStatus
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		rows = append(rows, r)
	}
	return rows
}

// waitCaughtUp waits until every shard's cursor equals the journal head.
func waitCaughtUp(t *testing.T, dir, name string, d time.Duration, store ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		rows := status(t, dir, name, store...)
		lag := int64(0)
		for _, r := range rows {
			lag += r.LagEvents
		}
		if len(rows) > 0 && lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up after %s: %+v", d, rows)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// owners returns how many shards each worker owns.
func owners(t *testing.T, dir, name string, store ...string) map[string]int {
	m := map[string]int{}
	for _, r := range status(t, dir, name, store...) {
		if r.Owner != "" {
			m[r.Owner]++
		}
	}
	return m
}

func newJournal(t *testing.T, shards int) string {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", fmt.Sprint(shards))
	return dir
}

func TestEndToEndFlights20k(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	for _, h := range []string{"flightdelays-as", "flightdelays-go"} {
		t.Run(h, func(t *testing.T) {
			wasm := testwasm.Path(t, h)
			dir := newJournal(t, 4)
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
			cw := watchCursors(t, dir, "flights", 4)
			projhost(t, "run", "--data", dir, "--name", "flights", "--handler", wasm, "--until-caught-up", "--worker-id", "solo")
			flightcheck.Check(t, fs, readModel(t, dir, "flights"))
			cw.check(t)
			for _, r := range status(t, dir, "flights") {
				require.Zero(t, r.LagEvents, r.Shard)
				require.Empty(t, r.Owner, "leases are released at exit")
			}
		})
	}
}

// TestKill9TwiceWhileAppending: two workers on one data dir while events are appended in
// chunks; one worker is killed with SIGKILL at a random point, restarted, and the other one is
// killed later. The read model must be exact and no cursor may move backwards.
func TestKill9TwiceWhileAppending(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 4)
	cw := watchCursors(t, dir, "flights", 4)
	args := []string{"--data", dir, "--name", "flights", "--handler", wasm, "--lease-duration", "1500ms",
		"--batch-size", "20", "--cursor-every-events", "100", "--cursor-every", "100ms"}
	w1 := startWorker(t, "w1", args...)
	w2 := startWorker(t, "w2", args...)

	// Append 20 chunks of 1,000 events, 150 ms apart, while killing workers.
	appendDone := make(chan struct{})
	go func() {
		defer close(appendDone)
		for i := 0; i < 20; i++ {
			p := flightsFile(t, fs[i*1000:(i+1)*1000])
			out, err := exec.Command(binPath, "journal", "append", "--data", dir, p).CombinedOutput()
			if err != nil {
				t.Errorf("append chunk %d: %v: %s", i, err, out)
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
	require.NoError(t, w1.cmd.Process.Kill())
	t.Logf("killed w1")
	time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
	w3 := startWorker(t, "w3", args...)
	time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
	require.NoError(t, w2.cmd.Process.Kill())
	t.Logf("killed w2")
	<-appendDone
	waitCaughtUp(t, dir, "flights", 60*time.Second)
	require.NoError(t, w3.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, w3.wait(t, 30*time.Second))

	flightcheck.Check(t, fs, readModel(t, dir, "flights"))
	n := cw.check(t)
	t.Logf("%d cursor values recorded, none backwards", n)
}

// TestLeaseBalance16Shards: two workers split 16 shards 8/8; a third one joins and ends up with
// 5 or 6 within a few lease periods.
func TestLeaseBalance16Shards(t *testing.T) {
	wasm := testwasm.Path(t, "count-as")
	dir := newJournal(t, 16)
	args := []string{"--data", dir, "--name", "counts", "--handler", wasm, "--lease-duration", "1s"}
	startWorker(t, "w1", args...)
	startWorker(t, "w2", args...)
	waitOwners(t, dir, "counts", 10*time.Second, func(m map[string]int) bool {
		return len(m) == 2 && m["w1"] == 8 && m["w2"] == 8
	})
	startWorker(t, "w3", args...)
	start := time.Now()
	m := waitOwners(t, dir, "counts", 10*time.Second, func(m map[string]int) bool {
		return len(m) == 3 && m["w3"] >= 5 && m["w3"] <= 6 && m["w1"] >= 5 && m["w1"] <= 6 && m["w2"] >= 5 && m["w2"] <= 6
	})
	t.Logf("three workers balanced %v in %s (lease duration 1s)", m, time.Since(start).Round(100*time.Millisecond))
}

func waitOwners(t *testing.T, dir, name string, d time.Duration, ok func(map[string]int) bool, store ...string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := owners(t, dir, name, store...)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease owners after %s: %v", d, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPausedWorkerIsFenced: a worker stopped with SIGSTOP past its lease duration loses its
// shards to another worker; after SIGCONT it must neither save a cursor nor write the read model.
func TestPausedWorkerIsFenced(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 4)
	cw := watchCursors(t, dir, "flights", 4)
	projhost(t, "journal", "append", "--data", dir, flightsFile(t, fs[:5000]))
	args := []string{"--data", dir, "--name", "flights", "--handler", wasm, "--lease-duration", "1s",
		"--batch-size", "50", "--cursor-every", "2s", "--cursor-every-events", "100000"}
	a := startWorker(t, "a", args...)
	waitOwners(t, dir, "flights", 10*time.Second, func(m map[string]int) bool { return m["a"] == 4 })
	waitCaughtUp(t, dir, "flights", 30*time.Second)
	// Let a hold unsaved work (cursors are saved every 2 s), then freeze it.
	projhost(t, "journal", "append", "--data", dir, flightsFile(t, fs[5000:10000]))
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	b := startWorker(t, "b", args...)
	waitOwners(t, dir, "flights", 15*time.Second, func(m map[string]int) bool { return m["b"] == 4 })
	projhost(t, "journal", "append", "--data", dir, flightsFile(t, fs[10000:]))
	waitCaughtUp(t, dir, "flights", 30*time.Second)
	paused := len(a.log()) // a is stopped: everything it logged so far is before the pause
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	time.Sleep(2 * time.Second) // a wakes up, finds its leases invalid or fenced
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, b.wait(t, 30*time.Second))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	_ = a.wait(t, 30*time.Second)

	flightcheck.Check(t, fs, readModel(t, dir, "flights"))
	cw.check(t)
	// After SIGCONT, a must not have saved a cursor or written the read model (both happen in
	// one commit, logged as "cursor saved"), and it must say why it stopped its shards.
	after := a.log()[paused:]
	require.Contains(t, a.log()[:paused], `msg="cursor saved"`, "a saved cursors before the pause")
	require.NotContains(t, after, `msg="cursor saved"`)
	require.Regexp(t, `lease (not renewed|lost)|fenced`, after)
}

var (
	reReleased = regexp.MustCompile(`msg="shard released".* shard=(\S+) .*cursor=(\S*)`)
	reStarted  = regexp.MustCompile(`msg="shard started".* shard=(\S+) .*cursor=(\S*)`)
)

// TestGracefulHandover: a second worker joins (balancing hands shards over) and then the first
// stops with SIGTERM; each handed-over shard must start on the new owner exactly at the cursor
// the old owner released it with, so no event is processed twice.
func TestGracefulHandover(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 8)
	cw := watchCursors(t, dir, "flights", 8)
	projhost(t, "journal", "append", "--data", dir, flightsFile(t, fs[:10000]))
	args := []string{"--data", dir, "--name", "flights", "--handler", wasm, "--lease-duration", "1s",
		"--cursor-every-events", "100000", "--cursor-every", "10s"}
	a := startWorker(t, "a", args...)
	waitOwners(t, dir, "flights", 10*time.Second, func(m map[string]int) bool { return m["a"] == 8 })
	b := startWorker(t, "b", args...)
	waitOwners(t, dir, "flights", 15*time.Second, func(m map[string]int) bool { return m["a"] == 4 && m["b"] == 4 })
	projhost(t, "journal", "append", "--data", dir, flightsFile(t, fs[10000:]))
	beforeStop := len(a.log())
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, a.wait(t, 30*time.Second))
	waitOwners(t, dir, "flights", 15*time.Second, func(m map[string]int) bool { return m["b"] == 8 })
	waitCaughtUp(t, dir, "flights", 30*time.Second)
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, b.wait(t, 30*time.Second))

	flightcheck.Check(t, fs, readModel(t, dir, "flights"))
	cw.check(t)
	// Balancing moves shards by release (graceful) or by steal (the victim drops its unsaved work and
	// the thief replays it; fencing keeps the read model exact, as checked above). Every release
	// must hand over exactly; the SIGTERM must release all 4 remaining shards.
	released := map[string]string{}
	for _, m := range reReleased.FindAllStringSubmatch(a.log(), -1) {
		released[m[1]] = m[2]
	}
	require.Len(t, reReleased.FindAllStringSubmatch(a.log()[beforeStop:], -1), 4, "a released its 4 shards at SIGTERM")
	startedB := map[string][]string{}
	for _, m := range reStarted.FindAllStringSubmatch(b.log(), -1) {
		startedB[m[1]] = append(startedB[m[1]], m[2])
	}
	for shard, cur := range released {
		require.Contains(t, startedB[shard], cur, "b must start %s where a released it", shard)
	}
}
