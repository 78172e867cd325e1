// Package flightdelays is the flightdelays handler as it was tuned by hand before the Go SDK had
// guest.State (issue 14): its own typed aggregation, a key arena and unsafe.String/unsafe.Slice.
// It is kept only as the benchmark baseline of the documented example
// (plugins/examples/flightdelays, written with guest.State): `projhost bench compare` and
// `make bench` print the documented/tuned events/s ratio, natively and in WebAssembly
// (build/wasm/flightdelays-go-tuned.wasm, built by ./go). It writes the same documents as the
// example (checked by TestTunedMatchesExample); do not copy it.
package flightdelays

import (
	"fmt"
	"unsafe"

	"github.com/projhost/projhost/sdk/go/guest"

	example "github.com/projhost/projhost/plugins/examples/flightdelays"
)

// The documents, their encoding and decoding are the example's.
type (
	Airport = example.Airport
	Route   = example.Route
)

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
		delay, ok := fields.Int(0)
		if !ok {
			return badEvent(ev, "delay", "an integer")
		}
		distance, ok := fields.Int(1)
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
			if doc, ok := b.Read(example.Airports, origin); ok {
				if a.Decode(doc) != nil {
					return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"delayed\":N,\"total_delay\":N,\"max_delay\":N}: %.200s", example.Airports, origin, doc)
				}
			} else {
				a.MaxDelay = delay
			}
			ai = airports.add(origin, a)
			order = append(order, docRef{false, ai})
		}
		a := &airports.vals[ai]
		a.Flights++
		if delay > example.DelayedMinutes {
			a.Delayed++
		}
		a.TotalDelay += delay
		a.MaxDelay = max(a.MaxDelay, delay)

		keyBuf = append(append(append(keyBuf[:0], origin...), '-'), dest...)
		ri, ok := routes.idx[string(keyBuf)]
		if !ok {
			var r Route
			if doc, ok := b.Read(example.Routes, keyBuf); ok {
				if r.Decode(doc) != nil {
					return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"total_distance\":N}: %.200s", example.Routes, keyBuf, doc)
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
			docBuf = routes.vals[d.i].Append(docBuf[:0])
			b.Put(example.Routes, unsafe.Slice(unsafe.StringData(routes.keys[d.i]), len(routes.keys[d.i])), docBuf)
		} else {
			docBuf = airports.vals[d.i].Append(docBuf[:0])
			b.Put(example.Airports, unsafe.Slice(unsafe.StringData(airports.keys[d.i]), len(airports.keys[d.i])), docBuf)
		}
	}
	return nil
}

func badEvent(ev *guest.Event, field, want string) error {
	return fmt.Errorf("flightdelays: event seq %s (partition key %q): field %q missing or not %s in data %.200q",
		ev.Seq, ev.PartitionKey, field, want, ev.Data)
}
