package bench

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/source"
)

func TestParseInts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "1,100,1000", want: []int{1, 100, 1000}},
		{in: " 4 , 16,100 ", want: []int{4, 16, 100}},
		{in: "7", want: []int{7}},
		{in: "100,1,100", want: []int{100, 1}},
		{in: "", err: "empty list"},
		{in: "  ", err: "empty list"},
		{in: "0", err: `"0" in "0" is not a positive integer`},
		{in: "1,-5", err: `"-5" in "1,-5" is not a positive integer`},
		{in: "1,,2", err: `"" in "1,,2" is not a positive integer`},
		{in: "1.5", err: `"1.5" in "1.5" is not a positive integer`},
		{in: "ten", err: `"ten" in "ten" is not a positive integer`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseInts(tc.in)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrArgs)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRepeat(t *testing.T) {
	evs := []source.Event{
		{ShardID: host.TestShardID, Seq: "1", PartitionKey: "ORD", Data: []byte(`{"a":1}`)},
		{ShardID: host.TestShardID, Seq: "2", PartitionKey: "SFO", Data: []byte(`{"a":2}`)},
	}
	got := Repeat(evs, 3)
	require.Len(t, got, 6)
	for i, e := range got {
		assert.Equal(t, strconv.Itoa(i+1), e.Seq)
		assert.Equal(t, evs[i%2].PartitionKey, e.PartitionKey)
		assert.Equal(t, evs[i%2].Data, e.Data)
		assert.Equal(t, host.TestShardID, e.ShardID)
	}
	assert.Equal(t, "1", evs[0].Seq, "the input is not modified")
	assert.Len(t, Repeat(evs, 1), 2)
	assert.Len(t, Repeat(evs, 0), 2)
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 3.0, median([]float64{5, 1, 3}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 7.0, median([]float64{7}))
	assert.Equal(t, 0.0, median([]float64(nil)))
	assert.Equal(t, 15*time.Millisecond, median([]time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond}))
}

// measure is measureInterleaved with one member whose pass is one step.
func measure(ctx context.Context, d time.Duration, events int, pass func() error) (Rate, error) {
	rs, err := measureInterleaved(ctx, d, events, member{steps: 1, step: func(int) error { return pass() }})
	if err != nil {
		return Rate{}, err
	}
	return rs[0], nil
}

func TestMeasure(t *testing.T) {
	calls := 0
	r, err := measure(context.Background(), 0, 100, func() error { calls++; return nil })
	require.NoError(t, err)
	assert.GreaterOrEqual(t, calls, 1, "at least one pass, even with no time")
	assert.Equal(t, calls, r.Passes)
	assert.Greater(t, r.EventsPerSec, 0.0)

	calls = 0
	r, err = measure(context.Background(), 30*time.Millisecond, 10, func() error { calls++; time.Sleep(5 * time.Millisecond); return nil })
	require.NoError(t, err)
	assert.Equal(t, calls, r.Passes)
	assert.GreaterOrEqual(t, r.Passes, 2)
	assert.LessOrEqual(t, r.EventsPerSec, 10/0.005, "10 events per pass of at least 5 ms")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = measure(ctx, time.Second, 1, func() error { t.Fatal("pass after cancel"); return nil })
	assert.ErrorIs(t, err, context.Canceled)

	boom := errors.New("boom")
	_, err = measure(context.Background(), time.Second, 1, func() error { return boom })
	assert.ErrorIs(t, err, boom)
}

// TestMeasureInterleaved: two members take turns of about turnDuration, each going on with its
// pass where its last turn stopped; a pass's rate is its events over its steps' time.
func TestMeasureInterleaved(t *testing.T) {
	var order []string
	var steps [2][]int
	fast := member{steps: 4, step: func(i int) error {
		order, steps[0] = append(order, "fast"), append(steps[0], i)
		time.Sleep(time.Millisecond)
		return nil
	}}
	slow := member{steps: 6, step: func(i int) error {
		order, steps[1] = append(order, "slow"), append(steps[1], i)
		time.Sleep(4 * time.Millisecond)
		return nil
	}}
	rs, err := measureInterleaved(context.Background(), 30*time.Millisecond, 100, fast, slow)
	require.NoError(t, err)
	require.Len(t, rs, 2)

	// Turns: a run of fast steps lasting turnDuration, then slow ones, and so on.
	var turns [][2]any // member, steps in the turn
	for _, o := range order {
		if len(turns) == 0 || turns[len(turns)-1][0] != o {
			turns = append(turns, [2]any{o, 0})
		}
		turns[len(turns)-1][1] = turns[len(turns)-1][1].(int) + 1
	}
	require.GreaterOrEqual(t, len(turns), 4, "at least two rounds: %v", turns)
	assert.Equal(t, "fast", turns[0][0])
	for _, tn := range turns[:len(turns)-1] {
		limit := map[string]int{"fast": int(turnDuration / time.Millisecond), "slow": int(turnDuration/(4*time.Millisecond)) + 1}[tn[0].(string)]
		assert.LessOrEqual(t, tn[1].(int), limit, "a turn ends once it has taken turnDuration: %v", turns)
		assert.GreaterOrEqual(t, tn[1].(int), 1)
	}
	// Each member's steps cycle through its pass, across turns.
	for m, n := range []int{4, 6} {
		for i, s := range steps[m] {
			assert.Equal(t, i%n, s, "member %d step %d", m, i)
		}
		assert.Equal(t, len(steps[m])/n, rs[m].Passes, "member %d: finished passes", m)
	}
	assert.GreaterOrEqual(t, rs[1].Passes, 1)
	assert.Greater(t, rs[0].Passes, rs[1].Passes, "the fast member finishes more passes")
	assert.LessOrEqual(t, rs[0].EventsPerSec, 100/0.004, "100 events per pass of 4 steps of at least 1 ms")
	assert.LessOrEqual(t, rs[1].EventsPerSec, 100/0.024, "100 events per pass of 6 steps of at least 4 ms")
	assert.Greater(t, rs[1].EventsPerSec, 0.0)
}

func TestFormatters(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{group(0), "0"},
		{group(999), "999"},
		{group(1000), "1,000"},
		{group(1234567), "1,234,567"},
		{group(-45678), "-45,678"},
		{Dur(250 * time.Microsecond), "250 µs"},
		{Dur(12340 * time.Microsecond), "12.3 ms"},
		{Dur(1250 * time.Millisecond), "1.25 s"},
		{Bytes(512), "512 B"},
		{Bytes(65536), "64.0 KiB"},
		{Bytes(3 << 19), "1.5 MiB"},
		{Bytes(2 << 30), "2.0 GiB"},
		{signedBytes(-2048), "-2.0 KiB"},
		{signedBytes(2048), "+2.0 KiB"},
		{ratio(50, 200), "0.25"},
		{ratio(1, 0), "-"},
	} {
		assert.Equal(t, tc.want, tc.got)
	}
}

func handlerReport() *HandlerReport {
	return &HandlerReport{
		Name: "count-as.wasm", Events: 20000,
		CompileCold: 41700 * time.Microsecond, CompileWarm: 3500 * time.Microsecond, Instantiate: 183 * time.Microsecond,
		GuestMemory: 6 * 65536, HeapDelta: 528486, MemBatch: 1000,
		Rows: []HandlerRow{
			{BatchSize: 1, Deadline: true, Rate: Rate{EventsPerSec: 8459.4, Passes: 1}},
			{BatchSize: 1, Deadline: false, Rate: Rate{EventsPerSec: 130371, Passes: 7}},
			{BatchSize: 1000, Deadline: true, Rate: Rate{EventsPerSec: 118994.5, Passes: 6}},
			{BatchSize: 1000, Deadline: false, Rate: Rate{EventsPerSec: 303784, Passes: 15}},
		},
	}
}

func TestWriteHandler(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteHandler(&b, handlerReport()))
	want := `handler count-as.wasm: 20,000 events per pass, events/s = median of passes (wall, 1 goroutine)
  compile cold   41.7 ms     (new runtime, empty cache dir)
  compile warm   3.5 ms      (new runtime, same cache dir)
  instantiate    183 µs      (instance + _initialize)
  guest memory   384.0 KiB   (6 pages after a first batch of 1000)
  Go heap delta  +516.1 KiB  (per instance; the guest memory is outside the Go heap on Linux)
  batch  deadline  events/s  passes
  1      on        8,459     1
  1      off       130,371   7
  1000   on        118,995   6
  1000   off       303,784   15
`
	assert.Equal(t, want, b.String())
}

func TestWriteNative(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteNative(&b, &NativeReport{Name: "count", Events: 2000, Rows: []NativeRow{
		{BatchSize: 1, Rate: Rate{EventsPerSec: 1234001, Passes: 300}},
		{BatchSize: 100, Rate: Rate{EventsPerSec: 2329453.2, Passes: 512}},
	}}))
	want := `native count (compiled into the host, the host's handler path without WebAssembly): 2,000 events per pass, events/s = median of passes
  batch  events/s   passes
  1      1,234,001  300
  100    2,329,453  512
`
	assert.Equal(t, want, b.String())
}

func TestWriteComparison(t *testing.T) {
	native := &NativeReport{Name: "count", Events: 20000, Rows: []NativeRow{
		{BatchSize: 1, Rate: Rate{EventsPerSec: 1000000, Passes: 3}},
		{BatchSize: 100, Rate: Rate{EventsPerSec: 2000000, Passes: 3}}, // no module has 100
		{BatchSize: 1000, Rate: Rate{EventsPerSec: 4000000, Passes: 3}},
	}}
	other := &HandlerReport{Name: "count-go.wasm", Rows: []HandlerRow{
		{BatchSize: 1000, Deadline: false, Rate: Rate{EventsPerSec: 200000, Passes: 2}},
	}}
	var b strings.Builder
	require.NoError(t, WriteComparison(&b, native, []*HandlerReport{handlerReport(), other}))
	want := `count: WebAssembly vs native, passes interleaved per batch size (events/s = median of passes; native = compiled into the host, same host path; ratio = wasm/native)
  batch  build          deadline  events/s   wasm/native
  1      native         -         1,000,000  1.00
  1      count-as.wasm  on        8,459      0.01
  1      count-as.wasm  off       130,371    0.13
  100    native         -         2,000,000  1.00
  1000   native         -         4,000,000  1.00
  1000   count-as.wasm  on        118,995    0.03
  1000   count-as.wasm  off       303,784    0.08
  1000   count-go.wasm  off       200,000    0.05
`
	assert.Equal(t, want, b.String())
}

func TestWriteE2E(t *testing.T) {
	res := []E2EResult{
		{Module: "flightdelays-as.wasm", Shards: 4, Events: 100000, AppendTime: 1250 * time.Millisecond, ProjectTime: 8 * time.Second,
			Stats:        container.Stats{Events: 100000, Batches: 202, CursorSaves: 53},
			LeaseCreates: 4, LeaseUpdates: 16, LeaseLists: 9},
		{Module: "flightdelays-as.wasm", Shards: 100, Events: 100000, AppendTime: 2 * time.Second, ProjectTime: 10 * time.Second,
			Stats:        container.Stats{Events: 162392, Batches: 254, CursorSaves: 122},
			LeaseCreates: 100, LeaseUpdates: 400, LeaseConflicts: 3,
			Warnings: []Warning{{"lease not renewed in time: stopping shard without saving", 57}, {"shardmap: lease lost: renewal completed after the lease duration", 3}}},
	}
	assert.Equal(t, 80000.0, res[0].AppendRate())
	assert.Equal(t, 12500.0, res[0].ProjectRate())
	assert.InDelta(t, 0.053, res[0].CursorSavesPer100(), 1e-9)
	assert.Equal(t, int64(0), res[0].Replayed())
	assert.Equal(t, int64(62392), res[1].Replayed())
	assert.Equal(t, 0.0, E2EResult{}.CursorSavesPer100())
	assert.Equal(t, 0.0, E2EResult{Events: 5}.AppendRate())

	var b strings.Builder
	require.NoError(t, WriteE2E(&b, true, res))
	want := `e2e flightdelays-as.wasm (trusted): journal append, then one in-process runner with the embedded store until caught up
  shards  events   append ev/s  project ev/s  project time  ev/cpu-s  batches  replayed  cursor saves  per 100 ev  lease creates  lease updates  lease conflicts
  4       100,000  80,000       12,500        8.00 s        -         202      0         53            0.05        4              16             0
  100     100,000  50,000       10,000        10.00 s       -         254      62,392    122           0.08        100            400            3
  flightdelays-as.wasm, 100 shards: 57× warning "lease not renewed in time: stopping shard without saving"
  flightdelays-as.wasm, 100 shards: 3× warning "shardmap: lease lost: renewal completed after the lease duration"
`
	assert.Equal(t, want, b.String())
	b.Reset()
	require.NoError(t, WriteE2E(&b, false, nil))
	assert.Equal(t, "e2e (deadline on): no runs\n", b.String())

	// Two modules and the native handler over the same journals (4 and 16 shards): a table
	// each, then the ratios.
	run := func(module string, shards int, project time.Duration, native bool) E2EResult {
		return E2EResult{Module: module, Native: native, Shards: shards, Events: 100000, AppendTime: time.Second,
			ProjectTime: project, ProjectCPU: project / 2,
			Stats: container.Stats{Events: 100000, Batches: 210, CursorSaves: 60}, LeaseCreates: int64(shards), LeaseUpdates: 2 * int64(shards)}
	}
	all := []E2EResult{
		run("fd-as.wasm", 4, 8*time.Second, false), run("fd-go.wasm", 4, 20*time.Second, false), run("native fd", 4, 5*time.Second, true),
		run("fd-as.wasm", 16, 4*time.Second, false), run("fd-go.wasm", 16, 10*time.Second, false), run("native fd", 16, 2500*time.Millisecond, true),
	}
	all[2].Warnings = []Warning{{"slow", 2}}
	all[5].ProjectCPU = time.Second // the native run at 16 shards: 100,000 ev/cpu-s
	assert.Equal(t, 100000.0, all[5].ProjectCPURate())
	assert.Equal(t, 0.0, E2EResult{Events: 5}.ProjectCPURate())
	b.Reset()
	require.NoError(t, WriteE2E(&b, false, all))
	want = `e2e fd-as.wasm (deadline on): journal append, then one in-process runner with the embedded store until caught up
  shards  events   append ev/s  project ev/s  project time  ev/cpu-s  batches  replayed  cursor saves  per 100 ev  lease creates  lease updates  lease conflicts
  4       100,000  100,000      12,500        8.00 s        25,000    210      0         60            0.06        4              8              0
  16      100,000  100,000      25,000        4.00 s        50,000    210      0         60            0.06        16             32             0
e2e fd-go.wasm (deadline on): journal append, then one in-process runner with the embedded store until caught up
  shards  events   append ev/s  project ev/s  project time  ev/cpu-s  batches  replayed  cursor saves  per 100 ev  lease creates  lease updates  lease conflicts
  4       100,000  100,000      5,000         20.00 s       10,000    210      0         60            0.06        4              8              0
  16      100,000  100,000      10,000        10.00 s       20,000    210      0         60            0.06        16             32             0
e2e native fd: the Go handler compiled into the host, through the same runner, journal and store
  shards  events   append ev/s  project ev/s  project time  ev/cpu-s  batches  replayed  cursor saves  per 100 ev  lease creates  lease updates  lease conflicts
  4       100,000  100,000      20,000        5.00 s        40,000    210      0         60            0.06        4              8              0
  16      100,000  100,000      40,000        2.50 s        100,000   210      0         60            0.06        16             32             0
e2e wasm/native: each module's project events/s (wall) and events/cpu-s / those of native fd (same journal, same read model)
  shards  per     fd-as.wasm  fd-go.wasm
  4       wall s  0.62        0.25
  4       cpu s   0.62        0.25
  16      wall s  0.62        0.25
  16      cpu s   0.50        0.20
  native fd, 4 shards: 2× warning "slow"
`
	assert.Equal(t, want, b.String())
}

func TestWarnCounter(t *testing.T) {
	var errs strings.Builder
	wc := newWarnCounter(slog.NewTextHandler(&errs, nil))
	l := slog.New(wc).With("worker", "w1")
	l.Info("ignored")
	l.Warn("lease lost", "shard", "a")
	l.With("shard", "b").Warn("lease lost")
	l.WithGroup("g").Warn("late renewal")
	l.Error("broken", "err", "x")
	assert.Equal(t, []Warning{{"lease lost", 2}, {"late renewal", 1}}, wc.warnings())
	assert.Contains(t, errs.String(), `level=ERROR msg=broken worker=w1 err=x`)
	assert.NotContains(t, errs.String(), "lease lost")
	assert.False(t, wc.Enabled(context.Background(), slog.LevelInfo))
}
