package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
)

// ndjson writes flights-20k as JSON lines and returns its path.
func ndjson(t *testing.T) string {
	t.Helper()
	fs := flightcheck.Load(t, flights(t, "flights-20k.json"))
	var b bytes.Buffer
	for _, f := range fs {
		line, err := json.Marshal(f)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "flights-20k.ndjson")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

// TestMeasureSustained: two worker processes and an append process on an 8-shard journal; every
// event of flights-20k is appended and projected, and the read model is exact (--check).
func TestMeasureSustained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs projhost processes")
	}
	bin := filepath.Join(t.TempDir(), "projhost")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/projhost").CombinedOutput()
	require.NoError(t, err, "building projhost: %s", out)
	res, err := MeasureSustained(context.Background(), SustainedOptions{
		Projhost: bin, EventsPath: ndjson(t), Handler: testwasm.Path(t, testwasm.FlightDelaysAS),
		Shards: 8, Workers: 2, Duration: time.Minute, CatchUp: 3 * time.Minute, Balance: time.Minute,
		LeaseDuration: 3 * time.Second, Check: "flightdelays", TempDir: t.TempDir(), Sample: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Equal(t, int64(20000), res.Appended)
	assert.True(t, res.Checked)
	assert.Positive(t, res.AppendTime)
	assert.GreaterOrEqual(t, res.ProjectTime, res.AppendTime/2, "projecting cannot end long before the append") // the last events go in at the append's end
	assert.Positive(t, res.AppendCPU)
	assert.Positive(t, res.Samples)
	require.Len(t, res.Workers, 2)
	var events int64
	for _, w := range res.Workers {
		events += w.Events
		assert.Positive(t, w.CPU, w.ID)
	}
	assert.GreaterOrEqual(t, events, int64(20000), "the workers' counters cover every event")
	var b bytes.Buffer
	PrintSustained(&b, SustainedOptions{Check: "flightdelays"}, res)
	assert.Contains(t, b.String(), "appended            20000 events in ")
	assert.Contains(t, b.String(), "read model          exact (--check flightdelays)")
}

// TestMeasureSustainedHandlerFails: when the handler fails every batch (flightdelays over events
// that are not flights), the catch-up error carries each worker's log, which says why.
func TestMeasureSustainedHandlerFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs projhost processes")
	}
	bin := filepath.Join(t.TempDir(), "projhost")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/projhost").CombinedOutput()
	require.NoError(t, err, "building projhost: %s", out)
	events := filepath.Join(t.TempDir(), "e.ndjson")
	require.NoError(t, os.WriteFile(events, []byte("{\"origin\":\"a\"}\n{\"origin\":\"b\"}\n"), 0o644))
	_, err = MeasureSustained(context.Background(), SustainedOptions{
		Projhost: bin, EventsPath: events, Handler: testwasm.Path(t, testwasm.FlightDelaysAS),
		Shards: 2, Workers: 1, CatchUp: 3 * time.Second, Balance: time.Minute, TempDir: t.TempDir(),
	})
	require.ErrorIs(t, err, ErrSustained)
	assert.Contains(t, err.Error(), "within 3s of the append's end (--catch-up)\nworker w1: ")
	assert.Contains(t, err.Error(), "level=ERROR")
}

func TestMaxP99(t *testing.T) {
	for _, c := range []struct {
		in       []int64
		max, p99 int64
	}{
		{nil, 0, 0},
		{[]int64{5}, 5, 5},
		{[]int64{3, 1, 2}, 3, 3},
		{append(make([]int64, 99), 1000), 1000, 0}, // 100 values: the 99th is a 0
		{append(make([]int64, 98), 7, 1000), 1000, 7},
	} {
		mx, p := maxP99(c.in)
		assert.Equal(t, c.max, mx, "%v", c.in)
		assert.Equal(t, c.p99, p, "%v", c.in)
	}
}

func TestFeedLines(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "l.ndjson")
	require.NoError(t, os.WriteFile(lines, []byte("{\"a\":1}\n\n  {\"a\":2}  \r\n{\"a\":"+strings.Repeat("9", 70000)+"}"), 0o644))
	array := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(array, []byte(" [{\"a\":1}]"), 0o644))
	many := filepath.Join(dir, "many.ndjson")
	require.NoError(t, os.WriteFile(many, bytes.Repeat([]byte("{}\n"), 5000), 0o644))
	for _, c := range []struct {
		name     string
		path     string
		d        time.Duration
		rate     int
		want     string
		wantN    int64
		wantArgs bool
	}{
		{"lines trimmed, blank ones skipped, a line over the buffer whole", lines, time.Minute, 0,
			"{\"a\":1}\n{\"a\":2}\n{\"a\":" + strings.Repeat("9", 70000) + "}\n", 3, false},
		{"a JSON array refused", array, time.Minute, 0, "", 0, true},
		{"duration over: stops at the first thousand", many, time.Nanosecond, 0, strings.Repeat("{}\n", 1000), 1000, false},
		{"rate: 5000 lines at 20000/s", many, time.Minute, 20000, strings.Repeat("{}\n", 5000), 5000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := feedLines(context.Background(), &b, c.path, c.d, c.rate)
			if c.wantArgs {
				require.True(t, errors.Is(err, ErrArgs), "err = %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.wantN, n)
			assert.Equal(t, c.want, b.String())
		})
	}
}

func TestSustainedOptionsRefused(t *testing.T) {
	base := SustainedOptions{Projhost: "p", EventsPath: "e", Handler: "h"}
	for _, c := range []struct {
		name string
		edit func(*SustainedOptions)
	}{
		{"no handler", func(o *SustainedOptions) { o.Handler = "" }},
		{"shards over 1000", func(o *SustainedOptions) { o.Shards = 1001 }},
		{"negative workers", func(o *SustainedOptions) { o.Workers = -1 }},
		{"negative rate", func(o *SustainedOptions) { o.Rate = -1 }},
		{"unknown check", func(o *SustainedOptions) { o.Check = "count" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.edit(&o)
			_, err := MeasureSustained(context.Background(), o)
			assert.True(t, errors.Is(err, ErrArgs), "err = %v", err)
		})
	}
}

// TestSustainedInputsCheckedFirst: a missing or JSON-array events file and a missing handler are
// refused as bad arguments before any process starts (the projhost binary here does not exist:
// starting one would fail with ErrSustained instead, after the workers' balance wait).
func TestSustainedInputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "l.ndjson")
	require.NoError(t, os.WriteFile(lines, []byte("{\"origin\":\"a\"}\n"), 0o644))
	array := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(array, []byte("\r\n [{\"origin\":\"a\"}]"), 0o644))
	handler := filepath.Join(dir, "h.wasm")
	require.NoError(t, os.WriteFile(handler, []byte("\x00asm"), 0o644))
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		name, events, handler, want string
	}{
		{"missing events file", missing, handler, "--events: open " + missing},
		{"events file a JSON array", array, handler, array + " is a JSON array"},
		{"missing handler", lines, missing, "--handler: open " + missing},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := MeasureSustained(context.Background(), SustainedOptions{
				Projhost: filepath.Join(dir, "no-projhost"), EventsPath: c.events, Handler: c.handler,
				TempDir: dir,
			})
			require.ErrorIs(t, err, ErrArgs)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestSustainedCanceled: a run stopped by its context (Ctrl-C) returns the context's error, not
// only ErrSustained about the process the cancellation stopped.
func TestSustainedCanceled(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "l.ndjson")
	require.NoError(t, os.WriteFile(lines, []byte("{\"origin\":\"a\"}\n"), 0o644))
	handler := filepath.Join(dir, "h.wasm")
	require.NoError(t, os.WriteFile(handler, []byte("\x00asm"), 0o644))
	truePath, err := exec.LookPath("true")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = MeasureSustained(ctx, SustainedOptions{Projhost: truePath, EventsPath: lines, Handler: handler, TempDir: dir})
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, ErrSustained)
}
