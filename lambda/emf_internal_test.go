package lambda

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
)

// emfLine's members for the lag, memory, module and error kinds, by case; the structure is
// checked through Handle in lambda_test (TestEMF).
func TestEMFLine(t *testing.T) {
	now := time.UnixMilli(1_700_000_010_000)
	evs := func(arrival int64) []event.Event {
		out := make([]event.Event, 5)
		for i := range out {
			a := arrival
			if a > 0 {
				a += int64(i) * 100
			}
			out[i] = event.Event{Seq: strconv.Itoa(11 + i), ArrivalMs: a}
		}
		return out
	}
	cases := []struct {
		name      string
		fig       invocationFigures
		evs       []event.Event
		committed string
		want      map[string]any // members checked (JSON numbers as float64); nil value: absent
	}{
		{"all committed: the last record's age", invocationFigures{events: 5, batches: 1, saves: 1, memory: 1 << 17, module: "p v3", handler: 1500 * time.Microsecond},
			evs(1_700_000_000_000), "15",
			map[string]any{"Events": 5.0, "Batches": 1.0, "CursorSaves": 1.0, "LagEvents": 0.0, "LagMillis": 9600.0,
				"MemoryBytes": float64(1 << 17), "module": "p v3", "version": "3", "HandlerDuration": 1.5, "handlerErrorKinds": nil}},
		{"two left: the first uncommitted record's age", invocationFigures{events: 3, batches: 1, errors: 2, kinds: map[string]int64{"trap": 2}},
			evs(1_700_000_000_000), "13",
			map[string]any{"LagEvents": 2.0, "LagMillis": 9700.0, "HandlerErrors": 2.0, "handlerErrorKinds": map[string]any{"trap": 2.0},
				"MemoryBytes": nil, "module": nil, "version": nil}},
		{"nothing committed (the shard could not be opened)", invocationFigures{},
			evs(1_700_000_000_000), "",
			map[string]any{"LagEvents": 5.0, "LagMillis": 10000.0, "Events": 0.0, "DeadLetters": 0.0}},
		{"the cursor past the batch (a redelivery)", invocationFigures{}, evs(1_700_000_000_000), "99",
			map[string]any{"LagEvents": 0.0, "LagMillis": 9600.0}},
		{"no arrival timestamps: no LagMillis", invocationFigures{events: 5}, evs(0), "15",
			map[string]any{"LagEvents": 0.0, "LagMillis": nil}},
		{"an arrival after the clock: 0, not negative", invocationFigures{}, evs(1_700_000_020_000), "15",
			map[string]any{"LagMillis": 0.0}},
		{"a module name without a registry version", invocationFigures{module: "handler.wasm"}, evs(0), "15",
			map[string]any{"module": "handler.wasm", "version": nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := emfLine("p", "shardId-000000000001", &c.fig, c.evs, c.committed, now)
			require.NoError(t, err)
			require.Equal(t, byte('\n'), b[len(b)-1], "one line")
			var root map[string]any
			require.NoError(t, json.Unmarshal(b, &root))
			for k, want := range c.want {
				got, ok := root[k]
				if want == nil {
					require.False(t, ok, "%s absent: %s", k, b)
					continue
				}
				require.Equal(t, want, got, "%s in %s", k, b)
			}
			// Every metric declared is a member, and every member named like a metric is declared.
			aws := root["_aws"].(map[string]any)
			require.Equal(t, float64(now.UnixMilli()), aws["Timestamp"])
			declared := map[string]bool{}
			for _, m := range aws["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any) {
				declared[m.(map[string]any)["Name"].(string)] = true
			}
			for _, m := range emfMetrics {
				_, member := root[m.name]
				require.Equal(t, member, declared[m.name], "%s: member %v, declared %v", m.name, member, declared[m.name])
			}
		})
	}
}
