package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/source"
)

var natives = map[string]guest.Handler{"count": count.Handler}

// flights returns the path of a flights data file of the flightdelays example.
func flights(t *testing.T, name string) string {
	return filepath.Join(testwasm.RepoRoot(t), "plugins", "examples", "flightdelays", "data", name)
}

// runCommand runs `bench args...` in-process and returns its stdout and error.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := Command(natives)
	var out, errw bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestCommandArgumentErrors(t *testing.T) {
	ev := flights(t, "flights-2k.json")
	wasm := filepath.Join(t.TempDir(), "missing.wasm") // never read: arguments are checked first where possible
	empty := filepath.Join(t.TempDir(), "empty.wasm")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"handler without --handler", []string{"handler", "--events", ev}, "--handler is required"},
		{"handler without --events", []string{"handler", "--handler", "../../go.mod"}, "--events is required"},
		{"bad batch sizes", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--batch-sizes", "1,x"}, `--batch-sizes: bench: bad argument: "x" in "1,x" is not a positive integer`},
		{"batch larger than the events", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--batch-sizes", "100,2001"}, "batch size 2001 exceeds the 2000 events of a pass"},
		{"zero duration", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--duration", "0s"}, "--duration 0s must be positive"},
		{"zero repeat", []string{"native", "--events", ev, "--example", "count", "--repeat", "0"}, "--repeat 0 must be at least 1"},
		{"unknown native", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--native", "nope"}, `no native handler "nope" (available: count)`},
		{"same module twice", []string{"handler", "--handler", "../../go.mod", "--handler", "../../go.mod", "--events", ev}, `module name "go.mod" given twice`},
		{"empty module", []string{"handler", "--handler", empty, "--events", ev}, "--handler " + empty + " is an empty file"},
		{"unknown example", []string{"native", "--events", ev}, `no native handler "flightdelays" (available: count)`},
		{"e2e shards", []string{"e2e", "--handler", wasm, "--events", ev, "--shards", "4,0"}, `--shards: bench: bad argument: "0" in "4,0" is not a positive integer`},
		{"e2e batch size", []string{"e2e", "--handler", wasm, "--events", ev, "--batch-size", "0"}, "--batch-size 0 must be at least 1"},
		{"e2e without --events", []string{"e2e", "--handler", wasm}, "--handler and --events are required"},
		{"e2e unknown native", []string{"e2e", "--handler", wasm, "--events", ev, "--native", "nope"}, `no native handler "nope" (available: count)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCommand(t, tc.args...)
			require.ErrorIs(t, err, ErrArgs)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := runCommand(t, "handler", "--handler", wasm, "--events", ev)
	assert.ErrorContains(t, err, "reading handler: open "+wasm)
	_, err = runCommand(t, "handler", "--handler", "../../go.mod", "--events", ev+".missing")
	assert.ErrorContains(t, err, "reading events: open "+ev+".missing")
	_, err = runCommand(t, "handler", "--handler", "../../go.mod", "--events", ev, "--duration", "1ms", "--batch-sizes", "1")
	assert.ErrorContains(t, err, "not a WebAssembly module")
	// Two files with the same base name are labelled by their paths: the names check passes and
	// the modules are loaded.
	_, err = runCommand(t, "handler", "--handler", "../../go.mod", "--handler", "../../sdk/go/go.mod", "--events", ev, "--duration", "1ms", "--batch-sizes", "1")
	assert.ErrorContains(t, err, "not a WebAssembly module")
}

// number parses a table number such as "1,234" or "12.5".
func number(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	require.NoError(t, err, s)
	return f
}

// countASCopy returns the path of a copy of count-as.wasm named count-as2.wasm: a second module
// that compiles fast under the race detector (count-go takes seconds).
func countASCopy(t *testing.T) string {
	b, err := os.ReadFile(testwasm.Path(t, testwasm.CountAS))
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "count-as2.wasm")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// TestHandlerSmoke runs `bench handler` on two modules (count-as and a copy) with the native
// baseline over flights-2k for a tiny duration and checks the report's lines, that every figure
// is positive, and that every wasm/native ratio is the module's rate over the native rate of
// its batch size.
func TestHandlerSmoke(t *testing.T) {
	out, err := runCommand(t, "handler", "--handler", testwasm.Path(t, testwasm.CountAS), "--handler", countASCopy(t),
		"--events", flights(t, "flights-2k.json"), "--batch-sizes", "1,100", "--duration", "10ms", "--native", "count")
	require.NoError(t, err)
	t.Log("\n" + out)

	for _, name := range []string{"count-as.wasm", "count-as2.wasm"} {
		i := strings.Index(out, "handler "+name+": 2,000 events per pass")
		require.GreaterOrEqual(t, i, 0, name)
		table := out[i:]
		if j := strings.Index(table[1:], "\nhandler "); j >= 0 {
			table = table[:j+1]
		} else {
			table = table[:strings.Index(table, "\ncount: ")]
		}
		for _, label := range []string{"compile cold", "compile warm", "instantiate"} {
			m := regexp.MustCompile(`(?m)^  ` + label + `\s+([0-9.]+) (µs|ms|s) `).FindStringSubmatch(table)
			require.NotNil(t, m, label)
			assert.Greater(t, number(t, m[1]), 0.0, label)
		}
		m := regexp.MustCompile(`(?m)^  guest memory\s+\S+ \S+\s+\((\d+) pages after a first batch of 100\)$`).FindStringSubmatch(table)
		require.NotNil(t, m)
		assert.Greater(t, number(t, m[1]), 0.0)

		rows := regexp.MustCompile(`(?m)^  (\d+)\s+(on|off)\s+([\d,]+)\s+(\d+)$`).FindAllStringSubmatch(table, -1)
		require.Len(t, rows, 4, "batch x deadline rows")
		for i, want := range [][2]string{{"1", "on"}, {"1", "off"}, {"100", "on"}, {"100", "off"}} {
			assert.Equal(t, want[0], rows[i][1])
			assert.Equal(t, want[1], rows[i][2])
			assert.Greater(t, number(t, rows[i][3]), 0.0, "events/s")
			assert.GreaterOrEqual(t, number(t, rows[i][4]), 1.0, "passes")
		}
	}

	i := strings.Index(out, "count: WebAssembly vs native, passes interleaved per batch size")
	require.GreaterOrEqual(t, i, 0)
	cmp := regexp.MustCompile(`(?m)^  (\d+)\s+(native|count-as2?\.wasm)\s+(-|on|off)\s+([\d,]+)\s+([\d.]+)$`).FindAllStringSubmatch(out[i:], -1)
	require.Len(t, cmp, 10, "per batch size: native, then each module with the deadline on and off")
	nativeRate := 0.0
	for k, r := range cmp {
		want := []string{"native", "count-as.wasm", "count-as.wasm", "count-as2.wasm", "count-as2.wasm"}[k%5]
		assert.Equal(t, want, r[2])
		assert.Equal(t, []string{"1", "100"}[k/5], r[1])
		rate := number(t, r[4])
		assert.Greater(t, rate, 0.0)
		if r[2] == "native" {
			assert.Equal(t, "-", r[3])
			assert.Equal(t, "1.00", r[5])
			nativeRate = rate
			continue
		}
		assert.Equal(t, []string{"on", "off"}[(k%5-1)%2], r[3])
		assert.InDelta(t, rate/nativeRate, number(t, r[5]), 0.006, "ratio of %s at batch %s", r[2], r[1])
	}
}

// TestMeasureHandlersInterleaved: MeasureHandlers measures every module (deadline on and off)
// and the native baseline of a batch size in one rotation: each gets a row per batch size, in
// order, with a positive rate from at least one finished pass.
// TestHandlerFailingModule: a module that fails its first batch (flightdelays over events
// without a delay) ends bench handler with the handler's error, not a panic, and leaves no
// compilation cache directory behind.
func TestHandlerFailingModule(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	events := filepath.Join(t.TempDir(), "nodelay.ndjson")
	require.NoError(t, os.WriteFile(events, []byte(`{"origin":"DTW","destination":"LAS"}`+"\n"), 0o644))
	_, err := runCommand(t, "handler", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS),
		"--events", events, "--key-field", "origin", "--batch-sizes", "1", "--duration", "10ms")
	require.Error(t, err)
	assert.ErrorIs(t, err, host.ErrHandlerFailed)
	assert.Contains(t, err.Error(), `field "delay" missing`)
	left, _ := filepath.Glob(filepath.Join(tmp, "projhost-bench-cache-*"))
	assert.Empty(t, left, "compilation cache directories left behind")
}

func TestMeasureHandlersInterleaved(t *testing.T) {
	evs, err := LoadEvents(flights(t, "flights-2k.json"), "origin", 1)
	require.NoError(t, err)
	wasm, err := os.ReadFile(testwasm.Path(t, testwasm.CountAS))
	require.NoError(t, err)
	mods := []HandlerModule{{Name: "a", WASM: wasm}, {Name: "b", WASM: wasm}}
	res, err := MeasureHandlers(context.Background(), HandlerOptions{
		Modules: mods, Native: count.Handler, NativeName: "count",
		Events: evs, BatchSizes: []int{1000, 10}, Duration: 20 * time.Millisecond, InstantiateRuns: 1,
	})
	require.NoError(t, err)
	require.Len(t, res.Modules, 2)
	require.NotNil(t, res.Native)
	assert.Equal(t, "count", res.Native.Name)
	assert.Equal(t, 2000, res.Native.Events)
	require.Len(t, res.Native.Rows, 2)
	for i, size := range []int{1000, 10} {
		n := res.Native.Rows[i]
		assert.Equal(t, size, n.BatchSize)
		assert.Greater(t, n.EventsPerSec, 0.0)
		assert.GreaterOrEqual(t, n.Passes, 1)
		for m, rep := range res.Modules {
			assert.Equal(t, mods[m].Name, rep.Name)
			require.Len(t, rep.Rows, 4)
			for d, deadline := range []bool{true, false} {
				r := rep.Rows[2*i+d]
				assert.Equal(t, size, r.BatchSize)
				assert.Equal(t, deadline, r.Deadline)
				assert.Greater(t, r.EventsPerSec, 0.0)
				assert.GreaterOrEqual(t, r.Passes, 1)
			}
		}
	}

	res, err = MeasureHandlers(context.Background(), HandlerOptions{Modules: mods[:1], Events: evs, BatchSizes: []int{100}, Duration: time.Millisecond, InstantiateRuns: 1})
	require.NoError(t, err)
	assert.Nil(t, res.Native, "no native baseline without HandlerOptions.Native")
	require.Len(t, res.Modules, 1)
	assert.Len(t, res.Modules[0].Rows, 2)
}

func TestHandlerOptionsErrors(t *testing.T) {
	evs := []source.Event{{Seq: "1", PartitionKey: "k", Data: []byte(`{}`)}}
	m := HandlerModule{Name: "a.wasm", WASM: []byte{0}}
	for _, tc := range []struct {
		name string
		o    HandlerOptions
		want string
	}{
		{"no module", HandlerOptions{Events: evs}, "no module"},
		{"no name", HandlerOptions{Modules: []HandlerModule{{WASM: []byte{0}}}, Events: evs}, "a module and its name are required"},
		{"same name", HandlerOptions{Modules: []HandlerModule{m, m}, Events: evs}, `module name "a.wasm" given twice`},
		{"native without a name", HandlerOptions{Modules: []HandlerModule{m}, Native: count.Handler, Events: evs}, "the native handler needs a name"},
		{"no events", HandlerOptions{Modules: []HandlerModule{m}}, "no events"},
		{"bad batch size", HandlerOptions{Modules: []HandlerModule{m}, Events: evs, BatchSizes: []int{0}}, "batch size 0 is not positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MeasureHandlers(context.Background(), tc.o)
			require.ErrorIs(t, err, ErrArgs)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestNativeModuleSameDocs: the native baseline (flightdelays compiled into the host, through
// host.NewNativeModule and NativeGuests) writes the same read model as the Go and
// AssemblyScript modules over flights-2k, in batches of 100 and of 1,000.
func TestNativeModuleSameDocs(t *testing.T) {
	ctx := context.Background()
	evs, err := LoadEvents(flights(t, "flights-2k.json"), "origin", 1)
	require.NoError(t, err)
	rt, err := host.NewRuntime(ctx)
	require.NoError(t, err)
	defer rt.Close(ctx)
	mods := []*host.Module{host.NewNativeModule("flightdelays", NativeGuests(flightdelays.Handler, nil), nil)}
	for _, name := range []string{testwasm.FlightDelaysGo, testwasm.FlightDelaysAS} {
		b, err := os.ReadFile(testwasm.Path(t, name))
		require.NoError(t, err)
		mod, err := rt.Load(ctx, name, b)
		require.NoError(t, err)
		defer mod.Close(ctx)
		mods = append(mods, mod)
	}
	for _, size := range []int{100, 1000} {
		var docs [][]event.Doc
		for _, mod := range mods {
			h := mod.NewHandler(host.TestShardID)
			rm := host.NewMemReadModel()
			for pass := range 2 { // the second pass reads and updates the first's documents
				require.NoError(t, batches(evs, size, func(b []source.Event) error {
					muts, err := h.Handle(ctx, b, rm)
					rm.Apply(muts)
					return err
				}), "%s batch %d pass %d", mod.Name(), size, pass)
			}
			require.NoError(t, h.Close(ctx))
			docs = append(docs, rm.Docs())
		}
		require.NotEmpty(t, docs[0])
		for i := 1; i < len(docs); i++ {
			assert.Equal(t, docs[0], docs[i], "%s batch %d: the native read model", mods[i].Name(), size)
		}
	}
}

func TestMeasureNativeCount(t *testing.T) {
	evs, err := LoadEvents(flights(t, "flights-2k.json"), "origin", 2)
	require.NoError(t, err)
	require.Len(t, evs, 4000)
	rep, err := MeasureNative(context.Background(), "count", count.Handler, evs, []int{10, 1000}, time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 4000, rep.Events)
	require.Len(t, rep.Rows, 2)
	assert.Equal(t, 10, rep.Rows[0].BatchSize)
	assert.Equal(t, 1000, rep.Rows[1].BatchSize)
	for _, r := range rep.Rows {
		assert.Greater(t, r.EventsPerSec, 0.0)
		assert.GreaterOrEqual(t, r.Passes, 1)
	}
	_, err = MeasureNative(context.Background(), "count", nil, evs, nil, 0)
	assert.ErrorIs(t, err, ErrArgs)
	_, err = MeasureNative(context.Background(), "", count.Handler, evs, nil, 0)
	assert.ErrorIs(t, err, ErrArgs)
	_, err = MeasureNative(context.Background(), "count", count.Handler, nil, nil, 0)
	assert.ErrorIs(t, err, ErrArgs)
}

// TestMeasureE2E projects 3,500 flights (flights-2k repeated, limited) through a 2-shard journal
// with count-as and checks the counters: every event handled once (none replayed), one lease
// per shard, no lease conflicts, cursors saved.
func TestMeasureE2E(t *testing.T) {
	wasm := testwasm.Path(t, testwasm.CountAS)
	out, err := runCommand(t, "e2e", "--handler", wasm, "--events", flights(t, "flights-2k.json"),
		"--shards", "2", "--trusted", "--repeat", "2", "--limit", "3500", "--tmp", t.TempDir())
	require.NoError(t, err)
	t.Log("\n" + out)
	// 3,500 events: flights-2k twice, cut at the limit.
	rows := regexp.MustCompile(`(?m)^  2\s+3,500\s+([\d,]+)\s+([\d,]+)\s+\S+ \S+\s+[\d,]+\s+(\d+)\s+0\s+(\d+)\s+([\d.]+)\s+2\s+(\d+)\s+0$`).FindStringSubmatch(out)
	require.NotNil(t, rows, out)
	assert.Greater(t, number(t, rows[1]), 0.0, "append ev/s")
	assert.Greater(t, number(t, rows[2]), 0.0, "project ev/s")
	assert.GreaterOrEqual(t, number(t, rows[3]), 8.0, "batches: 3,500 events on 2 shards in batches of at most 500")
	assert.GreaterOrEqual(t, number(t, rows[4]), 2.0, "a cursor save per shard at least")
	assert.GreaterOrEqual(t, number(t, rows[6]), 4.0, "lease updates: an acquisition and a release per shard")
}

// TestMeasureE2ENative projects 2,000 flights through a 2-shard journal with count-as and
// count-go, then with count compiled in (bench e2e --native): every run handles every event
// once, the read models are the same (MeasureE2E compares them), and the ratios are printed.
func TestMeasureE2ENative(t *testing.T) {
	out, err := runCommand(t, "e2e", "--handler", testwasm.Path(t, testwasm.CountAS), "--handler", testwasm.Path(t, testwasm.CountGo),
		"--events", flights(t, "flights-2k.json"), "--shards", "2", "--native", "count", "--tmp", t.TempDir())
	require.NoError(t, err)
	t.Log("\n" + out)
	for _, table := range []string{"e2e count-as.wasm (deadline on)", "e2e count-go.wasm (deadline on)", "e2e native count: "} {
		i := strings.Index(out, table)
		require.GreaterOrEqual(t, i, 0, "no table %q", table)
		row := regexp.MustCompile(`(?m)^  2\s+2,000\s+[\d,]+\s+([\d,]+)\s+\S+ \S+\s+([\d,]+)\s+\d+\s+0\s`).FindStringSubmatch(out[i:])
		require.NotNil(t, row, "%s: no row of 2,000 events, none replayed", table)
		assert.Greater(t, number(t, row[1]), 0.0, "%s: project ev/s", table)
		assert.Greater(t, number(t, row[2]), 0.0, "%s: project ev/cpu-s", table)
	}
	require.Contains(t, out, "  shards  per     count-as.wasm  count-go.wasm\n")
	for _, per := range []string{"wall s", "cpu s"} {
		ratio := regexp.MustCompile(`(?m)^  2\s+` + per + `\s+(\d+\.\d\d)\s+(\d+\.\d\d)$`).FindStringSubmatch(out)
		require.NotNil(t, ratio, "no %s ratios in\n%s", per, out)
		assert.Greater(t, number(t, ratio[1]), 0.0, "count-as wasm/native per %s", per)
		assert.Greater(t, number(t, ratio[2]), 0.0, "count-go wasm/native per %s", per)
	}
}

// TestSameDocs: the read model comparison of the native run names the first difference.
func TestSameDocs(t *testing.T) {
	a := []readmodel.Doc{{Collection: "c", Key: "a", Doc: []byte(`{"n":1}`)}, {Collection: "c", Key: "b", Doc: []byte(`{"n":2}`)}}
	assert.NoError(t, sameDocs(a, a))
	assert.ErrorContains(t, sameDocs(a, a[:1]), "1 documents, want 2")
	b := []readmodel.Doc{a[0], {Collection: "c", Key: "b", Doc: []byte(`{"n":3}`)}}
	assert.ErrorContains(t, sameDocs(a, b), `document 1 is c/b {"n":3}, want c/b {"n":2}`)
}

// TestCPUProfile: --cpuprofile writes the command's CPU profile (gzip-compressed protobuf).
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	_, err := runCommand(t, "native", "--events", flights(t, "flights-2k.json"), "--example", "count",
		"--batch-sizes", "100", "--duration", "100ms", "--cpuprofile", path)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "gzip magic")
	_, err = runCommand(t, "native", "--events", flights(t, "flights-2k.json"), "--example", "count",
		"--cpuprofile", filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	assert.ErrorContains(t, err, "--cpuprofile: ")
}

// batches calls fn with consecutive slices of at most size events of evs.
func batches(evs []source.Event, size int, fn func([]source.Event) error) error {
	for start := 0; start < len(evs); start += size {
		if err := fn(evs[start:min(start+size, len(evs))]); err != nil {
			return err
		}
	}
	return nil
}
