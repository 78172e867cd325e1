package projection_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/projection"
)

// TestTraceLag: lag records are written for the first lag of an acquisition and for every
// change to or from 0, not for repeats or for changes within TraceLagEvery; they carry
// millis_behind and events_behind (-1 unknown, 0 kept, not omitted).
func TestTraceLag(t *testing.T) {
	var buf bytes.Buffer
	h := projection.TraceHooks(&buf)
	info := func(epoch, ms, ev int64) projection.LagInfo {
		return projection.LagInfo{ShardInfo: projection.ShardInfo{Projection: "p", ShardID: "s", Epoch: epoch}, MillisBehind: ms, EventsBehind: ev}
	}
	type lag struct{ epoch, ms, ev int64 }
	calls := []lag{
		{1, 5000, -1}, // first: traced
		{1, 5000, -1}, // repeat: not
		{1, 4000, -1}, // change within TraceLagEvery: not
		{1, 0, -1},    // reaches 0: traced
		{1, 0, -1},    // repeat: not
		{1, 300, -1},  // leaves 0: traced
		{2, 300, -1},  // a new acquisition: traced
		{2, 0, 0},     // journal-style 0/0: traced
	}
	for _, c := range calls {
		h.Lag(info(c.epoch, c.ms, c.ev))
	}
	var got []lag
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r projection.TraceRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		require.Equal(t, "lag", r.Event)
		require.Equal(t, "s", r.Shard)
		require.NotNil(t, r.MillisBehind, sc.Text())
		require.NotNil(t, r.EventsBehind, sc.Text())
		got = append(got, lag{r.Epoch, *r.MillisBehind, *r.EventsBehind})
	}
	require.Equal(t, []lag{{1, 5000, -1}, {1, 0, -1}, {1, 300, -1}, {2, 300, -1}, {2, 0, 0}}, got)
}
