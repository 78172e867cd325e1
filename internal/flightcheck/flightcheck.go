// Package flightcheck is the independent computation of the flightdelays read model that tests
// compare projhost's output with: plain Go and encoding/json over the flight records, sharing no
// code with the handlers.
package flightcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/projhost/projhost/readmodel"
)

// Flight is one BTS on-time record as in ../shared/data/README.md.
type Flight struct {
	Date        string `json:"date"`
	Delay       int64  `json:"delay"`
	Distance    int64  `json:"distance"`
	Origin      string `json:"origin"`
	Destination string `json:"destination"`
}

// DataPath returns the path of a file of plugins/examples/flightdelays/data (flights-2k.json,
// flights-20k.json).
func DataPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "plugins", "examples", "flightdelays", "data", name)
}

// Load reads a JSON array of flights.
func Load(tb testing.TB, path string) []Flight {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("flightcheck: %v", err)
	}
	var fs []Flight
	if err := json.Unmarshal(b, &fs); err != nil {
		tb.Fatalf("flightcheck: %s: %v", path, err)
	}
	return fs
}

// Expected computes the flightdelays read model of flights: "collection/key" -> document fields.
func Expected(flights []Flight) map[string]map[string]int64 {
	var e Expecter
	for _, f := range flights {
		e.Add(f)
	}
	return e.Model()
}

// Expecter computes the flightdelays read model one flight at a time, for inputs too large to
// hold (Expected is Add over a slice). The zero value is ready; not safe for concurrent use.
type Expecter struct {
	out map[string]map[string]int64
}

// Add accounts for one flight.
func (e *Expecter) Add(f Flight) {
	if e.out == nil {
		e.out = map[string]map[string]int64{}
	}
	a := e.out["airports/"+f.Origin]
	if a == nil {
		a = map[string]int64{"flights": 0, "delayed": 0, "total_delay": 0, "max_delay": f.Delay}
		e.out["airports/"+f.Origin] = a
	}
	a["flights"]++
	if f.Delay > 15 {
		a["delayed"]++
	}
	a["total_delay"] += f.Delay
	if f.Delay > a["max_delay"] {
		a["max_delay"] = f.Delay
	}
	rk := "routes/" + f.Origin + "-" + f.Destination
	r := e.out[rk]
	if r == nil {
		r = map[string]int64{"flights": 0, "total_distance": 0}
		e.out[rk] = r
	}
	r["flights"]++
	r["total_distance"] += f.Distance
}

// Model returns the read model of the flights added so far (shared with e: Add changes it).
func (e *Expecter) Model() map[string]map[string]int64 {
	if e.out == nil {
		e.out = map[string]map[string]int64{}
	}
	return e.out
}

// Decode turns read-model documents into the shape Expected returns. A document that is not a
// JSON object of integers is reported as an error.
func Decode(docs []readmodel.Doc) (map[string]map[string]int64, error) {
	out := make(map[string]map[string]int64, len(docs))
	for _, d := range docs {
		var m map[string]int64
		if err := json.Unmarshal(d.Doc, &m); err != nil {
			return nil, fmt.Errorf("%s/%s: %w: %s", d.Collection, d.Key, err, d.Doc)
		}
		out[d.Collection+"/"+d.Key] = m
	}
	return out, nil
}

// Diff returns up to max human-readable differences between want and got (empty when equal).
func Diff(want, got map[string]map[string]int64, max int) []string {
	var diffs []string
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %v", k, w))
		case !wok:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %v", k, g))
		case !equal(w, g):
			diffs = append(diffs, fmt.Sprintf("%s: got %v, want %v", k, g, w))
		}
		if len(diffs) >= max {
			break
		}
	}
	return diffs
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Check fails tb when docs differ from the independent computation over flights, document by
// document, and reports the document count compared.
func Check(tb testing.TB, flights []Flight, docs []readmodel.Doc) {
	tb.Helper()
	got, err := Decode(docs)
	if err != nil {
		tb.Fatalf("flightcheck: %v", err)
	}
	want := Expected(flights)
	if d := Diff(want, got, 10); len(d) > 0 {
		tb.Fatalf("flightcheck: read model differs from the independent computation (%d docs want, %d got):\n%v", len(want), len(got), d)
	}
}

// JSON is the flight as an event's data.
func (f Flight) JSON() []byte {
	b, _ := json.Marshal(f) // cannot fail: strings and integers
	return b
}

// QuotedJSON is the flight with its delay given as a JSON string ("delay":"17"): the malformed
// form that the flightdelays handlers fail on unless built lenient
// (flightdelays.AcceptQuotedNumbers). The computation of Expected is the same for both forms.
func (f Flight) QuotedJSON() []byte {
	b, _ := json.Marshal(struct {
		Date        string `json:"date"`
		Delay       string `json:"delay"`
		Distance    int64  `json:"distance"`
		Origin      string `json:"origin"`
		Destination string `json:"destination"`
	}{f.Date, fmt.Sprint(f.Delay), f.Distance, f.Origin, f.Destination})
	return b
}
