package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/plugins/examples/count"
)

func TestCompareArgumentErrors(t *testing.T) {
	ev := flights(t, "flights-2k.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no baseline", []string{"compare", "--handler", "../../go.mod", "--events", ev}, "--handler and --baseline are required"},
		{"one native", []string{"compare", "--handler", "a.wasm", "--baseline", "b.wasm", "--events", ev, "--native", "count"}, "give both --native and --native-baseline, or neither"},
		{"unknown native", []string{"compare", "--handler", "a.wasm", "--baseline", "b.wasm", "--events", ev, "--native", "nope", "--native-baseline", "count"}, `no native handler "nope" (available: count)`},
		{"unknown native baseline", []string{"compare", "--handler", "a.wasm", "--baseline", "b.wasm", "--events", ev, "--native", "count", "--native-baseline", "nope"}, `no native handler "nope" (available: count)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCommand(t, tc.args...)
			require.ErrorIs(t, err, ErrArgs)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := MeasureCompare(context.Background(), CompareOptions{Name: "a", BaselineName: "b", WASM: []byte{0}, BaselineWASM: []byte{0}, Native: count.Handler})
	assert.ErrorIs(t, err, ErrArgs)
}

// TestCompareSmoke compares count-as with count-go (same documents) for a tiny duration, in
// WebAssembly and natively (count against itself): a row per batch size and build, every rate
// positive, and the ratio that of the two rates.
func TestCompareSmoke(t *testing.T) {
	as, gow := testwasm.Path(t, testwasm.CountAS), testwasm.Path(t, testwasm.CountGo)
	out, err := runCommand(t, "compare", "--handler", as, "--baseline", gow, "--events", flights(t, "flights-2k.json"),
		"--batch-sizes", "10,100", "--duration", "10ms", "--native", "count", "--native-baseline", "count")
	require.NoError(t, err)
	t.Log("\n" + out)
	assert.Contains(t, out, "compare count-as.wasm with baseline count-go.wasm: 2,000 events per pass")
	rows := regexp.MustCompile(`(?m)^  (\d+)\s+(wasm \(deadline on\)|native)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 4, "batch x build rows")
	for i, want := range [][2]string{{"10", "wasm (deadline on)"}, {"100", "wasm (deadline on)"}, {"10", "native"}, {"100", "native"}} {
		assert.Equal(t, want[0], rows[i][1])
		assert.Equal(t, want[1], rows[i][2])
		rate, base := number(t, rows[i][3]), number(t, rows[i][4])
		assert.Greater(t, rate, 0.0)
		assert.Greater(t, base, 0.0)
		assert.InDelta(t, rate/base, number(t, rows[i][5]), 0.01+0.001*rate/base, "ratio")
	}
}

func TestMeasureCompareRows(t *testing.T) {
	evs, err := LoadEvents(flights(t, "flights-2k.json"), "origin", 1)
	require.NoError(t, err)
	wasm, err := os.ReadFile(testwasm.Path(t, testwasm.CountGo))
	require.NoError(t, err)
	rep, err := MeasureCompare(context.Background(), CompareOptions{
		Name: "x", BaselineName: "y", WASM: wasm, BaselineWASM: wasm,
		Events: evs, BatchSizes: []int{1000}, Duration: time.Millisecond,
	})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 1, "no native rows without native handlers")
	r := rep.Rows[0]
	assert.Equal(t, fmt.Sprint(1000, false), fmt.Sprint(r.BatchSize, r.Native))
	assert.GreaterOrEqual(t, r.Rate.Passes, 1)
	assert.GreaterOrEqual(t, r.Baseline.Passes, 1)
	assert.Greater(t, r.Ratio(), 0.0)
	assert.Zero(t, CompareRow{Rate: Rate{EventsPerSec: 5}}.Ratio(), "no baseline rate")
}
