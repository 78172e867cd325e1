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

	"github.com/projhost/projhost/wasmabi/guest"
)

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

// scratch buffers reused across events and batches (one handler instance is never entered
// concurrently; natively, one Native at a time may run this Handler).
var docBuf, keyBuf []byte

// Handler is the projection's batch handler.
func Handler(b *guest.Batch) error {
	for b.Next() {
		ev := b.Event()
		d := ev.Data
		delay, ok := guest.JSONInt(d, "delay")
		if !ok {
			return badEvent(ev, "delay", "an integer")
		}
		distance, ok := guest.JSONInt(d, "distance")
		if !ok {
			return badEvent(ev, "distance", "an integer")
		}
		origin, ok := guest.JSONString(d, "origin")
		if !ok || len(origin) == 0 {
			return badEvent(ev, "origin", "a non-empty string")
		}
		dest, ok := guest.JSONString(d, "destination")
		if !ok || len(dest) == 0 {
			return badEvent(ev, "destination", "a non-empty string")
		}

		var a Airport
		if doc, ok := b.Read(Airports, origin); ok {
			if a, ok = parseAirport(doc); !ok {
				return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"delayed\":N,\"total_delay\":N,\"max_delay\":N}: %.200s", Airports, origin, doc)
			}
		} else {
			a.MaxDelay = delay
		}
		a.Flights++
		if delay > DelayedMinutes {
			a.Delayed++
		}
		a.TotalDelay += delay
		a.MaxDelay = max(a.MaxDelay, delay)
		docBuf = AppendAirport(docBuf[:0], a)
		b.Put(Airports, origin, docBuf)

		keyBuf = append(append(append(keyBuf[:0], origin...), '-'), dest...)
		var r Route
		if doc, ok := b.Read(Routes, keyBuf); ok {
			if r, ok = parseRoute(doc); !ok {
				return fmt.Errorf("flightdelays: stored document %s/%s is not {\"flights\":N,\"total_distance\":N}: %.200s", Routes, keyBuf, doc)
			}
		}
		r.Flights++
		r.TotalDistance += distance
		docBuf = AppendRoute(docBuf[:0], r)
		b.Put(Routes, keyBuf, docBuf)
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
