package e2esuite

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
)

// Switch is a shard's switch point from a trace's module record: the events after After were
// handled by Module (recorded when a worker opens the shard and when the shard switches to
// another version at a batch boundary).
type Switch struct {
	After  string
	Module string
	At     time.Time // when it was recorded
}

// Switches returns each shard's switch points, in the order of rs (the workers' trace records
// merged in time order).
func Switches(rs []projection.TraceRecord) map[string][]Switch {
	out := map[string][]Switch{}
	for _, r := range rs {
		if r.Event == "module" {
			out[r.Shard] = append(out[r.Shard], Switch{r.Seq, r.Module, r.Time})
		}
	}
	return out
}

// ByModule returns the flights of events (each shard's, in stream order) by the module that
// handled them: the module of the shard's last switch point (in time order) before the event.
// It fails t for an event no switch point covers.
func ByModule(t testing.TB, sw map[string][]Switch, events map[string][]source.Event) map[string][]flightcheck.Flight {
	t.Helper()
	out := map[string][]flightcheck.Flight{}
	for shard, evs := range events {
		for _, ev := range evs {
			mod := ""
			for _, s := range sw[shard] {
				if event.CompareSeq(ev.Seq, s.After) > 0 {
					mod = s.Module
				}
			}
			if mod == "" {
				t.Fatalf("event %s/%s handled by no recorded version (switch points %+v)", shard, ev.Seq, sw[shard])
			}
			var f flightcheck.Flight
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				t.Fatalf("event %s/%s: %v", shard, ev.Seq, err)
			}
			out[mod] = append(out[mod], f)
		}
	}
	return out
}

// CheckCountThenFlightDelays checks a read model written in turns by the count handler (module
// count: collection "counts", {"count":N} per origin) and flightdelays (module fd), given the
// flights each handled (ByModule): the counts documents count count's flights, each once, and
// the airports and routes documents equal flightcheck's computation over fd's flights. It
// holds on every store: a new owner handles an interrupted write's range again with the version
// that wrote it (projection.ModuleRecorder). It returns how many flights each version handled.
func CheckCountThenFlightDelays(t testing.TB, by map[string][]flightcheck.Flight, count, fd string, docs []readmodel.Doc) (int, int) {
	t.Helper()
	var fdDocs []readmodel.Doc
	got := map[string]map[string]int64{}
	for _, d := range docs {
		if d.Collection != "counts" {
			fdDocs = append(fdDocs, d)
			continue
		}
		var c struct{ Count int64 }
		if err := json.Unmarshal(d.Doc, &c); err != nil {
			t.Fatalf("counts/%s: %v", d.Key, err)
		}
		got["counts/"+d.Key] = map[string]int64{"flights": c.Count}
	}
	want := map[string]map[string]int64{}
	for _, f := range by[count] {
		k := "counts/" + f.Origin
		if want[k] == nil {
			want[k] = map[string]int64{"flights": 0}
		}
		want[k]["flights"]++
	}
	if d := flightcheck.Diff(want, got, 10); len(d) > 0 {
		t.Errorf("counts documents: not the events of the count periods, each once:\n%s", strings.Join(d, "\n"))
	}
	flightcheck.Check(t, by[fd], fdDocs)
	return len(by[count]), len(by[fd])
}

// switchesOf returns each shard's switch points from the traces of ws so far, merged in time
// order (the workers run on one machine).
func switchesOf(t *testing.T, ws ...*Worker) map[string][]Switch {
	t.Helper()
	var rs []projection.TraceRecord
	for _, w := range ws {
		rs = append(rs, Where(w.Records(t), Is("module"))...)
	}
	slices.SortStableFunc(rs, func(a, b projection.TraceRecord) int { return a.Time.Compare(b.Time) })
	return Switches(rs)
}
