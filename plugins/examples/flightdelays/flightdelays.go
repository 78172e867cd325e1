// Package flightdelays is the flight-delay projection example: per-airport and per-route
// aggregates of U.S. flight records (flights-*.json, see data/README.md). Its Handler runs
// unchanged in WebAssembly (./go, built as build/wasm/flightdelays-go.wasm) and natively through
// guest.Native (the native baseline of the benchmarks).
//
// Event data: {"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}
// with integer delay (minutes, negative = early) and distance (miles). It maintains, with
// read-modify-write through Batch.Read:
//
//	airports/<origin>:             {"flights":N,"delayed":N,"total_delay":N,"max_delay":N}
//	routes/<origin>-<destination>: {"flights":N,"total_distance":N}
//
// delayed counts flights with delay > DelayedMinutes; total_delay includes negative delays. The
// AssemblyScript version (./as) writes byte-identical documents. An event that is not a JSON
// object with those fields fails the batch with an error naming its sequence number.
package flightdelays

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/projhost/projhost/wasmabi/guest"
)

// AcceptQuotedNumbers makes the handler accept a delay or distance given as a JSON string that
// holds a decimal integer ("17"), as some upstream feeds send them. Off by default (such events
// fail their batch); the lenient build (`go build -tags lenient`, build/wasm/
// flightdelays-go-lenient.wasm) turns it on: it is the "fixed handler" of the dead-letter replay
// tests.
var AcceptQuotedNumbers bool

// intField returns field i of the scanned event as an integer.
func intField(i int) (int64, bool) {
	if v, ok := fields.Int(i); ok || !AcceptQuotedNumbers {
		return v, ok
	}
	raw, ok := fields.String(i)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	return v, err == nil
}

// DelayedMinutes is the arrival delay above which a flight counts as delayed.
const DelayedMinutes = 15

// Collections written by the handler.
const (
	Airports = "airports"
	Routes   = "routes"
)

// Airport is the document of airports/<origin>.
type Airport struct {
	Flights, Delayed, TotalDelay, MaxDelay int64
}

// Route is the document of routes/<origin>-<destination>.
type Route struct {
	Flights, TotalDistance int64
}

// AppendAirport appends the JSON document of a to dst.
func AppendAirport(dst []byte, a Airport) []byte {
	o := guest.NewObject(dst)
	o.Int("flights", a.Flights).Int("delayed", a.Delayed).Int("total_delay", a.TotalDelay).Int("max_delay", a.MaxDelay)
	return o.Bytes()
}

// AppendRoute appends the JSON document of r to dst.
func AppendRoute(dst []byte, r Route) []byte {
	o := guest.NewObject(dst)
	o.Int("flights", r.Flights).Int("total_distance", r.TotalDistance)
	return o.Bytes()
}

// Per-batch state, reused across batches (one handler instance is never entered concurrently;
// natively, one Native at a time may run this Handler). Each document the batch touches is read
// once, when its key first appears, aggregated in Go structs, and written once at the end of the
// batch, in the order the keys first appeared (the order the SDK's cache would emit them in if
// every event did Read and Put).
var (
	fields   = guest.NewJSONFields("delay", "distance", "origin", "destination")
	airports = aggIndex[Airport]{}
	routes   = aggIndex[Route]{}
	order    []docRef // documents in first-touch order
	keyArena []byte   // bytes of this batch's keys; map keys alias it
	docBuf   []byte
	keyBuf   []byte
)

// docRef names one aggregate: an airport (route false) or a route, by index.
type docRef struct {
	route bool
	i     int32
}

// aggIndex holds one collection's aggregates of the current batch.
type aggIndex[T any] struct {
	idx  map[string]int32
	keys []string
	vals []T
}

func (a *aggIndex[T]) reset() {
	if a.idx == nil {
		a.idx = make(map[string]int32)
	}
	clear(a.idx)
	a.keys, a.vals = a.keys[:0], a.vals[:0]
}

// add registers key (copied into keyArena) with value v and returns its index.
func (a *aggIndex[T]) add(key []byte, v T) int32 {
	start := len(keyArena)
	keyArena = append(keyArena, key...) // a reallocation leaves older keys on the old array, kept alive by them
	k := unsafe.String(&keyArena[start], len(key))
	i := int32(len(a.vals))
	a.idx[k] = i
	a.keys = append(a.keys, k)
	a.vals = append(a.vals, v)
	return i
}

// Handler is the projection's batch handler.
func Handler(b *guest.Batch) error {
	airports.reset()
	routes.reset()
	order = order[:0]
	keyArena = keyArena[:0]
	for b.Next() {
		ev := b.Event()
		fields.Scan(ev.Data)
		delay, ok := intField(0)
		if !ok {
			return badEvent(ev, "delay", "an integer")
		}
		distance, ok := intField(1)
		if !ok {
			return badEvent(ev, "distance", "an integer")
		}
		origin, ok := fields.String(2)
		if !ok || len(origin) == 0 {
			return badEvent(ev, "origin", "a non-empty string")
		}
		dest, ok := fields.String(3)
		if !ok || len(dest) == 0 {
			return badEvent(ev, "destination", "a non-empty string")
		}

		ai, ok := airports.idx[string(origin)]
		if !ok {
			var a Airport
			if doc, ok := b.Read(Airports, origin); ok {
				if a, ok = parseAirport(doc); !ok {
					return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"delayed\":N,\"total_delay\":N,\"max_delay\":N}: %.200s", Airports, origin, doc)
				}
			} else {
				a.MaxDelay = delay
			}
			ai = airports.add(origin, a)
			order = append(order, docRef{false, ai})
		}
		a := &airports.vals[ai]
		a.Flights++
		if delay > DelayedMinutes {
			a.Delayed++
		}
		a.TotalDelay += delay
		a.MaxDelay = max(a.MaxDelay, delay)

		keyBuf = append(append(append(keyBuf[:0], origin...), '-'), dest...)
		ri, ok := routes.idx[string(keyBuf)]
		if !ok {
			var r Route
			if doc, ok := b.Read(Routes, keyBuf); ok {
				if r, ok = parseRoute(doc); !ok {
					return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"total_distance\":N}: %.200s", Routes, keyBuf, doc)
				}
			}
			ri = routes.add(keyBuf, r)
			order = append(order, docRef{true, ri})
		}
		r := &routes.vals[ri]
		r.Flights++
		r.TotalDistance += distance
	}
	for _, d := range order {
		if d.route {
			docBuf = AppendRoute(docBuf[:0], routes.vals[d.i])
			b.Put(Routes, unsafe.Slice(unsafe.StringData(routes.keys[d.i]), len(routes.keys[d.i])), docBuf)
		} else {
			docBuf = AppendAirport(docBuf[:0], airports.vals[d.i])
			b.Put(Airports, unsafe.Slice(unsafe.StringData(airports.keys[d.i]), len(airports.keys[d.i])), docBuf)
		}
	}
	return nil
}

func badEvent(ev *guest.Event, field, want string) error {
	return fmt.Errorf("flightdelays: event seq %s (partition key %q): field %q missing or not %s in data %.200q",
		ev.Seq, ev.PartitionKey, field, want, ev.Data)
}

func parseAirport(doc []byte) (a Airport, ok bool) {
	var ok1, ok2, ok3, ok4 bool
	a.Flights, ok1 = guest.JSONInt(doc, "flights")
	a.Delayed, ok2 = guest.JSONInt(doc, "delayed")
	a.TotalDelay, ok3 = guest.JSONInt(doc, "total_delay")
	a.MaxDelay, ok4 = guest.JSONInt(doc, "max_delay")
	return a, ok1 && ok2 && ok3 && ok4
}

func parseRoute(doc []byte) (r Route, ok bool) {
	var ok1, ok2 bool
	r.Flights, ok1 = guest.JSONInt(doc, "flights")
	r.TotalDistance, ok2 = guest.JSONInt(doc, "total_distance")
	return r, ok1 && ok2
}
