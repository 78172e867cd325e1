package main

// End-to-end tests of container mode: real `projhost run` processes on one local journal with
// leases, cursors and read models in DynamoDB (dynalite). Failures are real: kill -9, SIGSTOP,
// a TCP proxy that black-holes or resets one worker's DynamoDB connections, SIGTERM, and a
// worker whose monotonic clock runs 30 s ahead (a Linux time namespace).
//
// Every test ends by comparing the read model in DynamoDB with internal/flightcheck and by
// checking cursor history two ways: the cursor table polled every 5 ms never moves a cursor
// backwards or lowers its epoch, and the workers' own `msg="cursor saved"` lines (every
// successful save, with shard, epoch and cursor) never show an older epoch committing past the
// cursor a newer epoch started from (see checkSaves).
//
// dynalite: $PROJHOST_DYNAMODB_ENDPOINT, or tools/dynalite/start.sh on a free port, started on
// first use and stopped by TestMain. Without node the tests skip (CI=true: fail).
//
// PROJHOST_E2E_MEASURE=1 also runs TestDynamoMeasure (recovery time after kill -9 with the
// default lease duration, DynamoDB writes per 100 events, events/s against the embedded store).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/tcpproxy"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/shardmap"
)

// ---- dynalite ----

var dynalite struct {
	once     sync.Once
	endpoint string
	err      error
	stop     func()
}

// dynaliteEndpoint returns the endpoint of the shared dynalite, starting it on first use, or
// skips t when it cannot be had (fails it with CI=true).
func dynaliteEndpoint(t *testing.T) string {
	t.Helper()
	dynalite.once.Do(func() {
		if ep := os.Getenv("PROJHOST_DYNAMODB_ENDPOINT"); ep != "" {
			dynalite.endpoint = ep
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			dynalite.err = err
			return
		}
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		tmp, err := os.MkdirTemp("", "projhost-dynalite-")
		if err != nil {
			dynalite.err = err
			return
		}
		script := filepath.Join("..", "..", "tools", "dynalite")
		env := append(os.Environ(), "DYNALITE_PIDFILE="+filepath.Join(tmp, "dynalite.pid"))
		cmd := exec.Command(filepath.Join(script, "start.sh"), port)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			dynalite.err = fmt.Errorf("tools/dynalite/start.sh %s: %w: %s", port, err, stderr.String())
			os.RemoveAll(tmp)
			return
		}
		dynalite.endpoint = strings.TrimSpace(string(out))
		dynalite.stop = func() {
			c := exec.Command(filepath.Join(script, "stop.sh"), port)
			c.Env = env
			_ = c.Run()
			os.RemoveAll(tmp)
		}
	})
	if dynalite.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("dynalite: %v", dynalite.err)
		}
		t.Skipf("no dynalite (set PROJHOST_DYNAMODB_ENDPOINT): %v", dynalite.err)
	}
	return dynalite.endpoint
}

// stopDynalite stops a dynalite dynaliteEndpoint started (TestMain calls it).
func stopDynalite() {
	if dynalite.stop != nil {
		dynalite.stop()
	}
}

// ---- tables and store flags ----

// dynEnv is one test's set of DynamoDB tables.
type dynEnv struct {
	endpoint string
	prefix   string
	client   *dynamodb.Client
}

var prefixSeq struct {
	sync.Mutex
	n int
}

// newDynEnv creates fresh tables with `projhost tables create` and deletes them when t ends.
func newDynEnv(t *testing.T) *dynEnv {
	t.Helper()
	ep := dynaliteEndpoint(t)
	prefixSeq.Lock()
	prefixSeq.n++
	prefix := fmt.Sprintf("e2e%d-%d-", os.Getpid(), prefixSeq.n)
	prefixSeq.Unlock()
	out := projhost(t, "tables", "create", "--dynamodb-endpoint", ep, "--table-prefix", prefix)
	require.Contains(t, out, prefix+"leases")
	require.Contains(t, out, prefix+"deadletters")
	c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(ep))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dynamotables.DeleteTables(ctx, c, prefix); err != nil {
			t.Logf("deleting tables %s*: %v", prefix, err)
		}
	})
	return &dynEnv{endpoint: ep, prefix: prefix, client: c}
}

// store returns the store flags of the tables, reaching DynamoDB at endpoint ("" = directly).
func (d *dynEnv) store(endpoint string) []string {
	if endpoint == "" {
		endpoint = d.endpoint
	}
	return []string{"--store", "dynamodb", "--dynamodb-endpoint", endpoint, "--table-prefix", d.prefix}
}

func isDynamo(store []string) bool { return slices.Contains(store, "dynamodb") }

// parseStore parses store flags.
func parseStore(t *testing.T, store []string) storeFlags {
	t.Helper()
	var sf storeFlags
	cmd := &cobra.Command{}
	sf.register(cmd)
	require.NoError(t, cmd.ParseFlags(store))
	return sf
}

// dynamoCursors lists the cursors of projection name with one strongly consistent Query.
func dynamoCursors(t *testing.T, store []string, name string) cursorLister {
	t.Helper()
	sf := parseStore(t, store)
	c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(sf.endpoint))
	require.NoError(t, err)
	names, err := dynamotables.NamesFor(sf.prefix)
	require.NoError(t, err)
	return func(ctx context.Context) (map[string]cursorstore.Cursor, error) {
		out := map[string]cursorstore.Cursor{}
		p := dynamodb.NewQueryPaginator(c, &dynamodb.QueryInput{
			TableName:                 aws.String(names.Cursors),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": dynamotables.CursorsPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: name}},
			ConsistentRead:            aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, it := range page.Items {
				var cur cursorstore.Cursor
				if v, ok := it[dynamotables.CursorsSK].(*types.AttributeValueMemberS); ok {
					cur.ShardID = v.Value
				}
				if v, ok := it["seq"].(*types.AttributeValueMemberS); ok {
					cur.Seq = v.Value
				}
				if v, ok := it["epoch"].(*types.AttributeValueMemberN); ok {
					cur.Epoch, _ = strconv.ParseInt(v.Value, 10, 64)
				}
				out[cur.ShardID] = cur
			}
		}
		return out, nil
	}
}

// leases lists the leases of projection name.
func (d *dynEnv) leases(t *testing.T, name string) []shardmap.Lease {
	t.Helper()
	st := openStores(t, "", d.store(""))
	defer st.Close()
	ls, err := st.Leases.List(context.Background(), name)
	require.NoError(t, err)
	return ls
}

// ---- log parsing ----

var (
	reSaved    = regexp.MustCompile(`time=(\S+) .*msg="cursor saved" .*shard=(\S+) epoch=(\d+) cursor=(\S+)`)
	reStartedE = regexp.MustCompile(`time=(\S+) .*msg="shard started" .*shard=(\S+) epoch=(\d+) cursor=(\S+)`)
	reAcquired = regexp.MustCompile(`msg="shardmap: lease acquired" .*shard=(\S+) how=(\S+) from=(\S+) epoch=(\d+)`)
)

// logEvent is one parsed "cursor saved" or "shard started" line.
type logEvent struct {
	worker, shard, seq string
	epoch              int64
	at                 time.Time
}

func unquote(s string) string { return strings.Trim(s, `"`) }

func parseEvents(re *regexp.Regexp, worker, log string) []logEvent {
	var out []logEvent
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		e, _ := strconv.ParseInt(m[3], 10, 64)
		at, _ := time.Parse(time.RFC3339Nano, m[1])
		out = append(out, logEvent{worker: worker, shard: m[2], epoch: e, seq: unquote(m[4]), at: at})
	}
	return out
}

func cmpSeq(a, b string) int {
	x, _ := strconv.ParseInt(orZero(a), 10, 64)
	y, _ := strconv.ParseInt(orZero(b), 10, 64)
	return int(x - y)
}

// checkSaves checks every successful cursor save the workers logged: within one (shard, epoch)
// the cursor never goes down, and no save of an epoch passes the cursor a newer epoch of the
// shard started from (the newer owner's cursor claim is the fencing point: an older owner that
// committed past it would have processed the shard together with the newer one). It returns the
// number of saves.
func checkSaves(t *testing.T, ws ...*worker) int {
	t.Helper()
	var saves, starts []logEvent
	for _, w := range ws {
		log := w.log()
		saves = append(saves, parseEvents(reSaved, w.id, log)...)
		starts = append(starts, parseEvents(reStartedE, w.id, log)...)
	}
	type key struct {
		shard string
		epoch int64
	}
	last := map[key]string{}
	var bad []string
	for _, s := range saves { // in log order per worker
		k := key{s.shard, s.epoch}
		if prev, ok := last[k]; ok && cmpSeq(s.seq, prev) < 0 {
			bad = append(bad, fmt.Sprintf("%s epoch %d saved %s after %s", s.shard, s.epoch, s.seq, prev))
		}
		last[k] = s.seq
	}
	for _, s := range saves {
		for _, st := range starts {
			if st.shard == s.shard && st.epoch > s.epoch && cmpSeq(s.seq, st.seq) > 0 {
				bad = append(bad, fmt.Sprintf("%s: %s saved %s with epoch %d past %s, where %s started epoch %d",
					s.shard, s.worker, s.seq, s.epoch, st.seq, st.worker, st.epoch))
			}
		}
	}
	require.Empty(t, bad, "cursor saves")
	return len(saves)
}

// finish checks a run: read model exact, cursors never backwards (polled and logged).
func finish(t *testing.T, fs []flightcheck.Flight, dir, name string, d *dynEnv, cw *cursorWatch, ws ...*worker) {
	t.Helper()
	flightcheck.Check(t, fs, readModel(t, dir, name, d.store("")...))
	polled := cw.check(t)
	saves := checkSaves(t, ws...)
	t.Logf("read model exact (%d flights); %d cursor values polled, %d saves logged, none backwards", len(fs), polled, saves)
}

// stopAll stops the workers gracefully (SIGTERM) and requires exit 0.
func stopAll(t *testing.T, ws ...*worker) {
	t.Helper()
	for _, w := range ws {
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, w := range ws {
		require.NoError(t, w.wait(t, 30*time.Second), "worker %s", w.id)
	}
}

// appendChunks appends fs in n chunks, pause apart, in the background; the channel closes when
// done.
func appendChunks(t *testing.T, dir string, fs []flightcheck.Flight, n int, pause time.Duration) <-chan struct{} {
	t.Helper()
	files := make([]string, n)
	for i := range n {
		files[i] = flightsFile(t, fs[i*len(fs)/n:(i+1)*len(fs)/n])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, p := range files {
			out, err := exec.Command(binPath, "journal", "append", "--data", dir, "--key-field", "origin", p).CombinedOutput()
			if err != nil {
				t.Errorf("append chunk %d: %v: %s", i, err, out)
				return
			}
			time.Sleep(pause)
		}
	}()
	return done
}

// workerArgs are the flags of a failure-test worker: short leases, cursor saves often enough to
// have many fencing points, few enough for dynalite.
func workerArgs(dir, wasm string, store []string, lease string) []string {
	return append([]string{"--data", dir, "--name", "flights", "--handler", wasm, "--lease-duration", lease,
		"--batch-size", "100", "--cursor-every-events", "500", "--cursor-every", "300ms"}, store...)
}

// ---- tests ----

// TestDynamoContainerMode: three workers share a 16-shard journal with DynamoDB leases, cursors
// and read model; they balance 6/5/5 and project flights-20k exactly.
func TestDynamoContainerMode(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	d := newDynEnv(t)
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 16)
	store := d.store("")
	cw := watchCursors(t, dir, "flights", 16, store...)
	args := append([]string{"--data", dir, "--name", "flights", "--handler", wasm, "--lease-duration", "3s"}, store...)
	ws := []*worker{startWorker(t, "w1", args...), startWorker(t, "w2", args...), startWorker(t, "w3", args...)}
	m := waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool {
		return len(m) == 3 && m["w1"] >= 5 && m["w1"] <= 6 && m["w2"] >= 5 && m["w2"] <= 6 && m["w3"] >= 5 && m["w3"] <= 6
	}, store...)
	t.Logf("balanced: %v", m)
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
	start := time.Now()
	waitCaughtUp(t, dir, "flights", 90*time.Second, store...)
	t.Logf("20,000 events projected by 3 workers in %s", time.Since(start).Round(100*time.Millisecond))
	stopAll(t, ws...)
	for _, r := range status(t, dir, "flights", store...) {
		require.Empty(t, r.Owner, "leases are released at exit: %s", r.Shard)
	}
	for _, w := range ws {
		require.Contains(t, w.log(), `msg="cursor saved"`, "worker %s took part", w.id)
	}
	finish(t, fs, dir, "flights", d, cw, ws...)
	// query reads the same read model through the CLI.
	out := projhost(t, append([]string{"query", "--data", dir, "--name", "flights", "--collection", "airports", "--key", "ORD"}, store...)...)
	want := flightcheck.Expected(fs)["airports/ORD"]
	var line struct{ Doc map[string]int64 }
	require.NoError(t, json.Unmarshal([]byte(out), &line))
	require.Equal(t, want, line.Doc)
}

// TestDynamoKill9Twice: three workers while events are appended; one is killed with SIGKILL and
// restarted under the same id, later another one is killed for good.
func TestDynamoKill9Twice(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))[:10000]
	d := newDynEnv(t)
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 16)
	store := d.store("")
	cw := watchCursors(t, dir, "flights", 16, store...)
	args := workerArgs(dir, wasm, store, "2s")
	w1, w2, w3 := startWorker(t, "w1", args...), startWorker(t, "w2", args...), startWorker(t, "w3", args...)
	appended := appendChunks(t, dir, fs, 10, 300*time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	time.Sleep(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)
	require.NoError(t, w1.cmd.Process.Kill())
	t.Log("killed w1")
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	w1b := startWorker(t, "w1", args...) // same id: its old leases must expire like anyone's
	time.Sleep(time.Duration(1000+rng.IntN(1500)) * time.Millisecond)
	require.NoError(t, w2.cmd.Process.Kill())
	t.Log("killed w2")
	<-appended
	waitCaughtUp(t, dir, "flights", 90*time.Second, store...)
	stopAll(t, w1b, w3)
	w1b.id = "w1(restarted)"
	finish(t, fs, dir, "flights", d, cw, w1, w2, w3, w1b)
}

// TestDynamoPausedWorkerIsFenced: worker a reaches DynamoDB through a proxy that freezes it in
// the middle of a write (a read-model item write, or a cursor save); a is also stopped with
// SIGSTOP past its lease duration. b takes every shard over and catches up. Then a continues and
// its frozen write reaches DynamoDB late: the item it targets must keep b's newer epoch (the
// conditional write is rejected), a must save no cursor with its old epochs, and the read model
// must stay exact.
func TestDynamoPausedWorkerIsFenced(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))[:4000]
	for _, tc := range []struct{ name, table, update string }{
		{"read-model write", "readmodel", "#d = :d"},
		{"cursor save", "cursors", "#sp = :sp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDynEnv(t)
			wasm := testwasm.Path(t, "flightdelays-as")
			dir := newJournal(t, 16)
			store := d.store("")
			cw := watchCursors(t, dir, "flights", 16, store...)
			p, err := tcpproxy.Start(strings.TrimPrefix(d.endpoint, "http://"))
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			a := startWorker(t, "a", workerArgs(dir, wasm, d.store("http://"+p.Addr()), "2s")...)
			waitOwners(t, dir, "flights", 20*time.Second, func(m map[string]int) bool { return m["a"] == 16 }, store...)
			table := []byte(`"TableName":"` + d.prefix + tc.table + `"`)
			var frozen []byte // the request a is frozen in (set once, before fired closes)
			fired := p.HoldWhen(func(b []byte) bool {
				if bytes.Contains(b, table) && bytes.Contains(b, []byte(tc.update)) {
					frozen = bytes.Clone(b[bytes.IndexByte(b, '{'):])
					return true
				}
				return false
			})
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightsFile(t, fs[:2000]))
			select {
			case <-fired:
			case <-time.After(30 * time.Second):
				t.Fatal("a never wrote to the " + tc.table + " table")
			}
			require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
			paused := len(a.log()) // a is frozen: nothing after this is from before the pause
			pre := parseEvents(reStartedE, "a", a.log())
			b := startWorker(t, "b", workerArgs(dir, wasm, store, "2s")...)
			waitOwners(t, dir, "flights", 20*time.Second, func(m map[string]int) bool { return m["b"] == 16 }, store...)
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightsFile(t, fs[2000:]))
			waitCaughtUp(t, dir, "flights", 60*time.Second, store...)

			require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
			p.SetMode(tcpproxy.Pass) // the frozen request reaches DynamoDB now, after b's claims
			// The late write must not land: the item keeps b's newer epoch. a either hears the
			// rejection (fenced / condition failed), or has already abandoned the request because
			// its monotonic clock told it the lease was gone (context canceled).
			time.Sleep(2 * time.Second)
			var req struct {
				Key    map[string]map[string]string
				Names  map[string]string          `json:"ExpressionAttributeNames"`
				Values map[string]json.RawMessage `json:"ExpressionAttributeValues"`
			}
			require.NoError(t, json.Unmarshal(frozen, &req), "%s", frozen)
			key := map[string]types.AttributeValue{}
			for k, v := range req.Key {
				key[k] = &types.AttributeValueMemberS{Value: v["S"]}
			}
			names, err := dynamotables.NamesFor(d.prefix)
			require.NoError(t, err)
			tableName := map[string]string{"readmodel": names.ReadModel, "cursors": names.Cursors}[tc.table]
			item, err := d.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(tableName), Key: key, ConsistentRead: aws.Bool(true)})
			require.NoError(t, err)
			var e struct{ N string }
			require.NoError(t, json.Unmarshal(req.Values[":e"], &e))
			frozenEpoch, _ := strconv.ParseInt(e.N, 10, 64)
			require.Positive(t, frozenEpoch)
			stored, ok := item.Item[req.Names["#e"]].(*types.AttributeValueMemberN)
			require.True(t, ok, "item %v has no %s", req.Key, req.Names["#e"])
			storedEpoch, _ := strconv.ParseInt(stored.Value, 10, 64)
			require.Greater(t, storedEpoch, frozenEpoch, "the late write of epoch %d to %v must not land", frozenEpoch, req.Key)
			after := a.log()[paused:]
			require.Regexp(t, `fenced|condition failed|context canceled`, after)
			// a may take shards again later (new epochs, by balancing); it must never save
			// with an epoch it held before the pause.
			old := map[string]bool{}
			for _, s := range pre {
				old[fmt.Sprintf("%s/%d", s.shard, s.epoch)] = true
			}
			for _, s := range parseEvents(reSaved, "a", after) {
				require.False(t, old[fmt.Sprintf("%s/%d", s.shard, s.epoch)], "a saved %s at %s with its pre-pause epoch %d", s.shard, s.seq, s.epoch)
			}
			waitCaughtUp(t, dir, "flights", 30*time.Second, store...)
			stopAll(t, a, b)
			finish(t, fs, dir, "flights", d, cw, a, b)
		})
	}
}

// TestDynamoStoreOutage: worker c reaches DynamoDB through a proxy that black-holes its
// connections (requests hang, and arrive late when it heals) or resets them (requests fail at
// once). Every shard c held must be owned by another worker within two lease durations of the
// outage's start; after it heals, c rejoins, and the read model is exact.
func TestDynamoStoreOutage(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))[:6000]
	const lease = 2 * time.Second
	for _, mode := range []tcpproxy.Mode{tcpproxy.Hold, tcpproxy.Refuse} {
		t.Run(mode.String(), func(t *testing.T) {
			d := newDynEnv(t)
			wasm := testwasm.Path(t, "flightdelays-as")
			dir := newJournal(t, 16)
			store := d.store("")
			cw := watchCursors(t, dir, "flights", 16, store...)
			p, err := tcpproxy.Start(strings.TrimPrefix(d.endpoint, "http://"))
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			a := startWorker(t, "a", workerArgs(dir, wasm, store, lease.String())...)
			b := startWorker(t, "b", workerArgs(dir, wasm, store, lease.String())...)
			c := startWorker(t, "c", workerArgs(dir, wasm, d.store("http://"+p.Addr()), lease.String())...)
			waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool { return m["c"] >= 4 && len(m) == 3 }, store...)
			appended := appendChunks(t, dir, fs, 8, 300*time.Millisecond)
			time.Sleep(800 * time.Millisecond)

			held := map[string]int64{} // c's shards -> epoch
			for _, l := range d.leases(t, "flights") {
				if l.Owner == "c" {
					held[l.ShardID] = l.Epoch
				}
			}
			require.NotEmpty(t, held)
			p.SetMode(mode)
			start := time.Now()
			var took time.Duration
			for {
				taken := 0
				for _, l := range d.leases(t, "flights") {
					if e, ok := held[l.ShardID]; ok && l.Owner != "" && l.Owner != "c" && l.Epoch > e {
						taken++
					}
				}
				if taken == len(held) {
					took = time.Since(start)
					break
				}
				require.Less(t, time.Since(start), 2*lease, "%d of c's %d shards owned by another worker after two lease durations", taken, len(held))
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: c's %d shards owned by a and b %s after the outage began (lease %s)", mode, len(held), took.Round(10*time.Millisecond), lease)
			time.Sleep(500 * time.Millisecond)
			p.SetMode(tcpproxy.Pass)
			<-appended
			// c is live again: it rejoins by balancing (steals), with new epochs.
			waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool { return m["c"] >= 1 }, store...)
			waitCaughtUp(t, dir, "flights", 60*time.Second, store...)
			stopAll(t, a, b, c)
			require.Regexp(t, `lease (not renewed|lost)|fenced`, c.log(), "c must have noticed it lost its leases")
			finish(t, fs, dir, "flights", d, cw, a, b, c)
		})
	}
}

// TestDynamoGracefulStop: one of three workers stops with SIGTERM while events flow; it releases
// its shards at its saved cursors and the others start them exactly there.
func TestDynamoGracefulStop(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))[:6000]
	d := newDynEnv(t)
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 16)
	store := d.store("")
	cw := watchCursors(t, dir, "flights", 16, store...)
	args := workerArgs(dir, wasm, store, "2s")
	a, b, c := startWorker(t, "a", args...), startWorker(t, "b", args...), startWorker(t, "c", args...)
	waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool { return len(m) == 3 && m["c"] >= 4 }, store...)
	appended := appendChunks(t, dir, fs, 6, 300*time.Millisecond)
	time.Sleep(time.Second)
	beforeStop := len(c.log())
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, c.wait(t, 30*time.Second))
	waitOwners(t, dir, "flights", 20*time.Second, func(m map[string]int) bool { return m["a"]+m["b"] == 16 }, store...)
	<-appended
	waitCaughtUp(t, dir, "flights", 60*time.Second, store...)
	stopAll(t, a, b)

	released := reReleased.FindAllStringSubmatch(c.log()[beforeStop:], -1)
	require.NotEmpty(t, released, "c released its shards at SIGTERM")
	started := map[string][]string{}
	for _, w := range []*worker{a, b} {
		for _, m := range reStarted.FindAllStringSubmatch(w.log(), -1) {
			started[m[1]] = append(started[m[1]], unquote(m[2]))
		}
	}
	for _, m := range released {
		require.Contains(t, started[m[1]], unquote(m[2]), "%s must start where c released it", m[1])
	}
	t.Logf("c released %d shards; each started on a or b at the released cursor", len(released))
	finish(t, fs, dir, "flights", d, cw, a, b, c)
}

// TestDynamoClockAheadNeverTakesLiveLease: a worker whose clocks run 30 s ahead joins two live
// workers. It must take leases only by balancing steals, never as "expired".
//
// What is real here: lease items carry no time at all (checked below), and workers compare only
// readings of their own Go monotonic clock (CLOCK_MONOTONIC). The worker runs in a Linux time
// namespace with CLOCK_MONOTONIC and CLOCK_BOOTTIME offset by +30 s (unshare --time, checked in
// /proc/PID/timens_offsets) and with another time zone (TZ). Its wall clock cannot be set apart
// on Linux: CLOCK_REALTIME has no namespace, and libfaketime cannot intercept Go's vDSO calls;
// moving the host's clock would disturb everything else on the machine. A store that kept expiry
// times (wall or monotonic) would make every live lease look expired to this worker.
func TestDynamoClockAheadNeverTakesLiveLease(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not found")
	}
	if out, err := exec.Command("unshare", "--time", "--monotonic", "30", "--fork", "true").CombinedOutput(); err != nil {
		t.Skipf("time namespaces unavailable (needs Linux >= 5.6 and root): %v: %s", err, out)
	}
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))[:3000]
	d := newDynEnv(t)
	wasm := testwasm.Path(t, "flightdelays-as")
	dir := newJournal(t, 16)
	store := d.store("")
	cw := watchCursors(t, dir, "flights", 16, store...)
	args := workerArgs(dir, wasm, store, "6s") // the default lease: under load a shorter one may lapse for real
	a, b := startWorker(t, "a", args...), startWorker(t, "b", args...)
	waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool { return m["a"] == 8 && m["b"] == 8 }, store...)

	ahead := startWorkerWith(t, "ahead", []string{"env", "TZ=Pacific/Kiritimati", "unshare", "--time", "--monotonic", "30",
		"--boottime", "30", "--fork", "--kill-child"}, args...)
	child := childPID(t, ahead.cmd.Process.Pid)
	offsets, err := os.ReadFile(fmt.Sprintf("/proc/%d/timens_offsets", child))
	require.NoError(t, err)
	require.Regexp(t, `monotonic\s+30\s`, string(offsets), "the worker's monotonic clock is 30 s ahead")

	appended := appendChunks(t, dir, fs, 6, 500*time.Millisecond)
	m := waitOwners(t, dir, "flights", 30*time.Second, func(m map[string]int) bool {
		return m["ahead"] >= 5 && m["ahead"] <= 6 && m["a"] >= 5 && m["b"] >= 5
	}, store...)
	t.Logf("balanced with the skewed worker: %v", m)
	<-appended
	waitCaughtUp(t, dir, "flights", 60*time.Second, store...)

	acq := reAcquired.FindAllStringSubmatch(ahead.log(), -1)
	require.NotEmpty(t, acq)
	for _, a := range acq {
		require.True(t, a[2] == "steal" || unquote(a[3]) == "", "the skewed worker took %s from live owner %s as %q", a[1], a[3], a[2])
	}
	for _, w := range []*worker{a, b} {
		require.NotContains(t, w.log(), "not renewed within the lease duration", "worker %s", w.id)
		require.NotContains(t, w.log(), "lease not renewed in time", "worker %s", w.id)
	}
	// No time in lease items: only these attributes exist.
	names, err := dynamotables.NamesFor(d.prefix)
	require.NoError(t, err)
	out, err := d.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(names.Leases)})
	require.NoError(t, err)
	require.Len(t, out.Items, 16)
	for _, it := range out.Items {
		for attr := range it {
			require.Contains(t, []string{"projection", "shard", "owner", "counter", "epoch", "parents", "state"}, attr)
		}
	}
	t.Logf("the skewed worker acquired %d leases, all by balancing steals", len(acq))
	require.NoError(t, syscall.Kill(child, syscall.SIGTERM)) // unshare does not forward signals
	require.NoError(t, ahead.wait(t, 30*time.Second))
	stopAll(t, a, b)
	finish(t, fs, dir, "flights", d, cw, a, b, ahead)
}

// childPID returns the only child of pid (waiting for it to exist).
func childPID(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			c, err := strconv.Atoi(f[0])
			require.NoError(t, err)
			return c
		}
		require.True(t, time.Now().Before(deadline), "no child of %d", pid)
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- measurements ----

// countingProxy is an HTTP reverse proxy to DynamoDB that counts requests by operation and
// table suffix (leases, cursors, readmodel).
type countingProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int64 // "UpdateItem leases" -> count
}

func newCountingProxy(t *testing.T, endpoint, prefix string) *countingProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	cp := &countingProxy{n: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	cp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		cp.mu.Lock()
		cp.n[op+" "+strings.TrimPrefix(in.TableName, prefix)]++
		cp.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *countingProxy) snapshot() map[string]int64 {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int64, len(cp.n))
	for k, v := range cp.n {
		out[k] = v
	}
	return out
}

func writesOf(n map[string]int64, table string) int64 {
	return n["UpdateItem "+table] + n["PutItem "+table] + n["DeleteItem "+table] + n["BatchWriteItem "+table]
}

var reStopped = regexp.MustCompile(`msg="worker stopped" .*events=(\d+) .*elapsed=(\S+)`)

// TestDynamoMeasure reports figures (no timing assertions): recovery after kill -9 with the
// default lease duration, DynamoDB writes per 100 events, events/s against the embedded store.
// Run: PROJHOST_E2E_MEASURE=1 go test ./cmd/projhost -run TestDynamoMeasure -v
func TestDynamoMeasure(t *testing.T) {
	if os.Getenv("PROJHOST_E2E_MEASURE") == "" {
		t.Skip("set PROJHOST_E2E_MEASURE=1 to measure")
	}
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
	wasm := testwasm.Path(t, "flightdelays-as")

	t.Run("recovery after kill -9, default lease", func(t *testing.T) {
		d := newDynEnv(t)
		dir := newJournal(t, 16)
		store := d.store("")
		args := append([]string{"--data", dir, "--name", "flights", "--handler", wasm}, store...) // defaults
		ws := map[string]*worker{}
		for _, id := range []string{"w1", "w2", "w3", "w4"} {
			ws[id] = startWorker(t, id, args...)
		}
		waitOwners(t, dir, "flights", 90*time.Second, func(m map[string]int) bool {
			return len(m) == 4 && m["w1"] >= 3 && m["w2"] >= 3 && m["w3"] >= 3 && m["w4"] >= 3
		}, store...)
		appended := appendChunks(t, dir, fs, 60, 500*time.Millisecond) // events keep flowing
		var results []time.Duration
		for _, victim := range []string{"w1", "w2", "w3"} {
			time.Sleep(2 * time.Second)
			held := map[string]int64{}
			for _, l := range d.leases(t, "flights") {
				if l.Owner == victim {
					held[l.ShardID] = l.Epoch
				}
			}
			killed := time.Now()
			require.NoError(t, ws[victim].cmd.Process.Kill())
			var last time.Time
			for len(held) > 0 {
				require.Less(t, time.Since(killed), 60*time.Second, "shards %v not restarted", held)
				for id, w := range ws {
					if id == victim {
						continue
					}
					for _, s := range parseEvents(reStartedE, id, w.log()) {
						if e, ok := held[s.shard]; ok && s.epoch > e && s.at.After(killed) {
							delete(held, s.shard)
							last = s.at
						}
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			results = append(results, last.Sub(killed))
			t.Logf("kill -9 %s: all its shards processing again after %s", victim, last.Sub(killed).Round(10*time.Millisecond))
			delete(ws, victim)
		}
		<-appended
		t.Logf("recovery times (default lease %s, renewed every third of it): %v", shardmap.DefaultLeaseDuration, results)
	})

	t.Run("writes per 100 events", func(t *testing.T) {
		d := newDynEnv(t)
		cp := newCountingProxy(t, d.endpoint, d.prefix)
		dir := newJournal(t, 16)
		store := d.store(cp.srv.URL)
		args := append([]string{"--data", dir, "--name", "flights", "--handler", wasm}, store...)
		ws := []*worker{startWorker(t, "w1", args...), startWorker(t, "w2", args...), startWorker(t, "w3", args...)}
		waitOwners(t, dir, "flights", 60*time.Second, func(m map[string]int) bool { return len(m) == 3 && m["w3"] >= 5 && m["w1"] >= 5 && m["w2"] >= 5 }, d.store("")...)
		for _, sc := range []struct {
			name   string
			chunks int
			pause  time.Duration
		}{{"bulk (20k appended at once)", 1, 0}, {"steady (20k in 40 chunks, 250 ms apart)", 40, 250 * time.Millisecond}} {
			before := cp.snapshot()
			start := time.Now()
			<-appendChunks(t, dir, fs, sc.chunks, sc.pause)
			waitCaughtUp(t, dir, "flights", 120*time.Second, d.store("")...)
			el := time.Since(start)
			after := cp.snapshot()
			diff := map[string]int64{}
			for k, v := range after {
				diff[k] = v - before[k]
			}
			per := func(n int64) float64 { return float64(n) * 100 / float64(len(fs)) }
			l, c, r := writesOf(diff, "leases"), writesOf(diff, "cursors"), writesOf(diff, "readmodel")
			t.Logf("%s in %s (%.0f events/s): writes per 100 events: leases %.2f, cursors %.2f, read model %.2f (fences+items), total %.2f; lease writes/s %.1f; all requests %v",
				sc.name, el.Round(100*time.Millisecond), float64(len(fs))/el.Seconds(), per(l), per(c), per(r), per(l+c+r), float64(l)/el.Seconds(), diff)
		}
		stopAll(t, ws...)
		both := append(append([]flightcheck.Flight(nil), fs...), fs...) // appended twice
		flightcheck.Check(t, both, readModel(t, dir, "flights", d.store("")...))
	})

	t.Run("events per second, dynamodb vs embedded", func(t *testing.T) {
		rate := func(store []string) float64 {
			dir := newJournal(t, 16)
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
			w := startWorker(t, "solo", append([]string{"--data", dir, "--name", "flights", "--handler", wasm, "--until-caught-up"}, store...)...)
			require.NoError(t, w.wait(t, 5*time.Minute))
			m := reStopped.FindStringSubmatch(w.log())
			require.NotNil(t, m, w.log())
			ev, _ := strconv.ParseFloat(m[1], 64)
			el, err := time.ParseDuration(m[2])
			require.NoError(t, err)
			flightcheck.Check(t, fs, readModel(t, dir, "flights", store...))
			return ev / el.Seconds()
		}
		local := rate(nil)
		dyn := rate(newDynEnv(t).store(""))
		t.Logf("one worker, 16 shards, flights-20k, defaults: embedded %.0f events/s, dynamodb (dynalite) %.0f events/s, ratio dynamodb/embedded %.2f",
			local, dyn, dyn/local)
	})
}
