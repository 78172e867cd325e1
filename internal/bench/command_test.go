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

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/sdk/go/guest"
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
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"handler without --handler", []string{"handler", "--events", ev}, "--handler is required"},
		{"handler without --events", []string{"handler", "--handler", "../../go.mod"}, "--events is required"},
		{"bad batch sizes", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--batch-sizes", "1,x"}, `--batch-sizes: bench: bad argument: "x" in "1,x" is not a positive integer`},
		{"zero duration", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--duration", "0s"}, "--duration 0s must be positive"},
		{"zero repeat", []string{"native", "--events", ev, "--example", "count", "--repeat", "0"}, "--repeat 0 must be at least 1"},
		{"unknown native", []string{"handler", "--handler", "../../go.mod", "--events", ev, "--native", "nope"}, `no native handler "nope" (available: count)`},
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
}

// number parses a table number such as "1,234" or "12.5".
func number(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	require.NoError(t, err, s)
	return f
}

// TestHandlerSmoke runs `bench handler` on count-as over flights-2k for a tiny duration and
// checks the report's lines and that every figure is positive.
func TestHandlerSmoke(t *testing.T) {
	wasm := testwasm.Path(t, testwasm.CountAS)
	out, err := runCommand(t, "handler", "--handler", wasm, "--events", flights(t, "flights-2k.json"),
		"--batch-sizes", "1,100", "--duration", "10ms", "--native", "count")
	require.NoError(t, err)
	t.Log("\n" + out)

	assert.Contains(t, out, "handler count-as.wasm: 2,000 events per pass")
	for _, label := range []string{"compile cold", "compile warm", "instantiate"} {
		m := regexp.MustCompile(`(?m)^  ` + label + `\s+([0-9.]+) (µs|ms|s) `).FindStringSubmatch(out)
		require.NotNil(t, m, label)
		assert.Greater(t, number(t, m[1]), 0.0, label)
	}
	m := regexp.MustCompile(`(?m)^  guest memory\s+\S+ \S+\s+\((\d+) pages after a first batch of 100\)$`).FindStringSubmatch(out)
	require.NotNil(t, m)
	assert.Greater(t, number(t, m[1]), 0.0)

	rows := regexp.MustCompile(`(?m)^  (\d+)\s+(on|off)\s+([\d,]+)\s+(\d+)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 4, "batch x deadline rows")
	for i, want := range [][2]string{{"1", "on"}, {"1", "off"}, {"100", "on"}, {"100", "off"}} {
		assert.Equal(t, want[0], rows[i][1])
		assert.Equal(t, want[1], rows[i][2])
		assert.Greater(t, number(t, rows[i][3]), 0.0, "events/s")
		assert.GreaterOrEqual(t, number(t, rows[i][4]), 1.0, "passes")
	}

	cmp := regexp.MustCompile(`(?m)^  (\d+)\s+(native|count-as\.wasm)\s+(-|on|off)\s+([\d,]+)\s+([\d.]+)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, cmp, 6, "per batch size: native, deadline on, deadline off")
	for _, r := range cmp {
		assert.Greater(t, number(t, r[4]), 0.0)
		assert.Greater(t, number(t, r[5]), 0.0)
		if r[2] == "native" {
			assert.Equal(t, "1.00", r[5])
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
