package flightdelays_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/bench"
	tuned "github.com/projhost/projhost/internal/bench/tuned/flightdelays"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
)

// load reads the example's flights file name as events (partition key = origin).
func load(tb testing.TB, name string) []guest.Event {
	tb.Helper()
	evs, err := bench.LoadEvents(filepath.Join("..", "..", "..", "..", "plugins", "examples", "flightdelays", "data", name), "origin", 1)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]guest.Event, len(evs))
	for i, e := range evs {
		out[i] = guest.Event{Seq: []byte(e.Seq), PartitionKey: []byte(e.PartitionKey), Data: e.Data}
	}
	return out
}

// TestTunedMatchesExample: the tuned baseline emits the example's mutations, in the same order,
// batch after batch, so the benchmark compares two handlers doing the same work.
func TestTunedMatchesExample(t *testing.T) {
	evs := load(t, "flights-2k.json")
	for _, size := range []int{1, 100, 1000} {
		t.Run(fmt.Sprintf("batch=%d", size), func(t *testing.T) {
			doc, tun := guest.NewNative(flightdelays.Handler), guest.NewNative(tuned.Handler)
			for start := 0; start < len(evs); start += size {
				b := evs[start:min(start+size, len(evs))]
				want, err := doc.Run("s", b)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tun.Run("s", b)
				if err != nil {
					t.Fatal(err)
				}
				if render(got) != render(want) || len(want) == 0 {
					t.Fatalf("batch at event %d: tuned mutations\n%s\ndiffer from the example's\n%s", start, render(got), render(want))
				}
			}
		})
	}
}

func render(ms []guest.Mutation) string {
	var s strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&s, "%d %s/%s %s\n", m.Op, m.Collection, m.Key, m.Doc)
	}
	return s.String()
}

func BenchmarkNative(b *testing.B) {
	evs := load(b, "flights-20k.json")
	for _, size := range []int{100, 1000} {
		for _, h := range []struct {
			name string
			h    guest.Handler
		}{{"documented", flightdelays.Handler}, {"tuned", tuned.Handler}} {
			b.Run(fmt.Sprintf("%s/batch=%d", h.name, size), func(b *testing.B) {
				n := guest.NewNative(h.h, guest.WithDocValidation(false))
				b.ReportAllocs()
				for b.Loop() {
					for start := 0; start < len(evs); start += size {
						if _, err := n.Run("s", evs[start:min(start+size, len(evs))]); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
