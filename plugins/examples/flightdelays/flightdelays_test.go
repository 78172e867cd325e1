package flightdelays_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
)

type flight = flightcheck.Flight

// load reads data/<name> and returns the events (partition key = origin, seq = 1-based index)
// and the decoded flights.
func load(tb testing.TB, name string) ([]guest.Event, []flight) {
	tb.Helper()
	b, err := os.ReadFile("data/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		tb.Fatal(err)
	}
	evs := make([]guest.Event, len(raws))
	fs := make([]flight, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &fs[i]); err != nil {
			tb.Fatal(err)
		}
		evs[i] = guest.Event{Seq: []byte(fmt.Sprint(i + 1)), PartitionKey: []byte(fs[i].Origin), ArrivalMs: int64(i), Data: r}
	}
	return evs, fs
}

// expected is the independent computation of internal/flightcheck, rendered as the documents
// both handler builds must write byte for byte (fields in this order).
func expected(fs []flight) map[string]string {
	want := map[string]string{}
	for k, d := range flightcheck.Expected(fs) {
		if strings.HasPrefix(k, "airports/") {
			want[k] = fmt.Sprintf(`{"flights":%d,"delayed":%d,"total_delay":%d,"max_delay":%d}`,
				d["flights"], d["delayed"], d["total_delay"], d["max_delay"])
		} else {
			want[k] = fmt.Sprintf(`{"flights":%d,"total_distance":%d}`, d["flights"], d["total_distance"])
		}
	}
	return want
}

func runAll(tb testing.TB, n *guest.Native, evs []guest.Event, batch int) {
	tb.Helper()
	for i := 0; i < len(evs); i += batch {
		if _, err := n.Run("shard-0", evs[i:min(i+batch, len(evs))]); err != nil {
			tb.Fatalf("batch at event %d: %v", i, err)
		}
	}
}

func storeOf(n *guest.Native) map[string]string {
	got := map[string]string{}
	for _, c := range []string{flightdelays.Airports, flightdelays.Routes} {
		for k, d := range n.Collection(c) {
			got[c+"/"+k] = string(d)
		}
	}
	return got
}

func TestMatchesIndependentComputation(t *testing.T) {
	evs, fs := load(t, "flights-2k.json")
	want := expected(fs)
	for _, batch := range []int{1, 7, 100, 2000} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			n := guest.NewNative(flightdelays.Handler)
			runAll(t, n, evs, batch)
			got := storeOf(n)
			if len(got) != len(want) {
				t.Fatalf("%d documents, want %d", len(got), len(want))
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %s, want %s", k, got[k], w)
				}
			}
		})
	}
	// Spot-check known values so a shared mistake in both computations cannot hide.
	if len(want) < 100 || !strings.HasPrefix(want["airports/"+fs[0].Origin], `{"flights":`) {
		t.Fatalf("unexpected expectation set: %d docs", len(want))
	}
}

func TestOneEventDocuments(t *testing.T) {
	n := guest.NewNative(flightdelays.Handler)
	evs := []guest.Event{
		{Seq: []byte("1"), PartitionKey: []byte("DTW"), Data: []byte(`{"date":"2001/01/01 00:47","delay":-3,"distance":1750,"origin":"DTW","destination":"LAS"}`)},
		{Seq: []byte("2"), PartitionKey: []byte("DTW"), Data: []byte(`{"delay":66,"distance":10,"origin":"DTW","destination":"LAS"}`)},
		{Seq: []byte("3"), PartitionKey: []byte("DTW"), Data: []byte(`{"delay":15,"distance":5,"origin":"DTW","destination":"SFO"}`)},
	}
	ms, err := n.Run("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%s/%s=%s", m.Collection, m.Key, m.Doc))
	}
	want := []string{
		`airports/DTW={"flights":3,"delayed":1,"total_delay":78,"max_delay":66}`,
		`routes/DTW-LAS={"flights":2,"total_distance":1760}`,
		`routes/DTW-SFO={"flights":1,"total_distance":5}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mutations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMalformedEventFailsBatch(t *testing.T) {
	good := `{"delay":1,"distance":2,"origin":"A","destination":"B"}`
	tests := []struct {
		name, data, wantMsg string
	}{
		{"not JSON", `delay=1`, `field "delay" missing or not an integer`},
		{"truncated", `{"delay":1,"distance":2,"origin":"A","destination":"B"`, `field "destination"`},
		{"missing delay", `{"distance":2,"origin":"A","destination":"B"}`, `field "delay"`},
		{"string delay", `{"delay":"1","distance":2,"origin":"A","destination":"B"}`, `field "delay"`},
		{"float distance", `{"delay":1,"distance":2.5,"origin":"A","destination":"B"}`, `field "distance"`},
		{"empty origin", `{"delay":1,"distance":2,"origin":"","destination":"B"}`, `field "origin" missing or not a non-empty string`},
		{"numeric destination", `{"delay":1,"distance":2,"origin":"A","destination":7}`, `field "destination"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := guest.NewNative(flightdelays.Handler)
			evs := []guest.Event{
				{Seq: []byte("49590338271490256608559692538361571095921575989136588898"), PartitionKey: []byte("A"), Data: []byte(good)},
				{Seq: []byte("49590338271490256608559692538361571095921575989136588899"), PartitionKey: []byte("A"), Data: []byte(tt.data)},
			}
			_, err := n.Run("s", evs)
			if !errors.Is(err, guest.ErrHandlerFailed) {
				t.Fatalf("err = %v, want ErrHandlerFailed", err)
			}
			for _, want := range []string{"event seq 49590338271490256608559692538361571095921575989136588899", tt.wantMsg} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if len(n.Collection(flightdelays.Airports)) != 0 {
				t.Error("a failed batch left documents behind")
			}
		})
	}
}

func TestCorruptStoredDocumentFailsBatch(t *testing.T) {
	n := guest.NewNative(flightdelays.Handler)
	n.Set(flightdelays.Airports, "A", []byte(`{"flights":"x"}`))
	_, err := n.Run("s", []guest.Event{{Seq: []byte("1"), PartitionKey: []byte("A"), Data: []byte(`{"delay":1,"distance":2,"origin":"A","destination":"B"}`)}})
	if !errors.Is(err, guest.ErrHandlerFailed) || !strings.Contains(err.Error(), "stored document airports/A") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkNative is the native baseline: the flightdelays handler over flights-20k in batches of
// 100 through guest.Native (batch encode, SDK decode, handler, output encode/decode/apply).
func BenchmarkNative(b *testing.B) {
	evs, _ := load(b, "flights-20k.json")
	for _, batch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			n := guest.NewNative(flightdelays.Handler)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				runAll(b, n, evs, batch)
			}
			reportRates(b, len(evs)*b.N, cpu0)
		})
	}
}

// BenchmarkHandlerOnly measures the handler and SDK without the native host's document
// validation (json.Valid per put) — closer to what runs inside WebAssembly.
func BenchmarkHandlerOnly(b *testing.B) {
	evs, _ := load(b, "flights-20k.json")
	n := guest.NewNative(flightdelays.Handler, guest.WithDocValidation(false))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		runAll(b, n, evs, 100)
	}
	reportRates(b, len(evs)*b.N, cpu0)
}

// cpuTime returns the process's user+system CPU time; on a shared, loaded machine CPU time per
// event is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates reports events/s (wall) and CPU ns/event (all threads, including GC) since cpu0.
func reportRates(b *testing.B, events int, cpu0 time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(events), "cpu-ns/event")
}
