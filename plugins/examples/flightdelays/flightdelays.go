// Package flightdelays is the flight-delay projection example: per-airport and per-route
// aggregates of U.S. flight records (flights-*.json, see data/README.md). Its Handler runs
// unchanged in WebAssembly (./go, built as build/wasm/flightdelays-go.wasm, or
// flightdelays-tinygo.wasm with TinyGo) and natively through guest.Native (the native baseline
// of the benchmarks).
//
// Event data: {"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}
// with integer delay (minutes, negative = early) and distance (miles). It maintains
//
//	airports/<origin>:             {"flights":N,"delayed":N,"total_delay":N,"max_delay":N}
//	routes/<origin>-<destination>: {"flights":N,"total_distance":N}
//
// delayed counts flights with delay > DelayedMinutes; total_delay includes negative delays. The
// AssemblyScript version (./as) writes byte-identical documents. An event that is not a JSON
// object with those fields fails the batch with an error naming its sequence number.
//
// It is written the documented way: the documents are guest.State values, decoded when a batch
// first touches them (unless the State kept them, unchanged, from the batch before), updated by
// plain Go code and encoded once at the end of the batch.
package flightdelays

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/projhost/projhost/sdk/go/guest"
)

// DelayedMinutes is the arrival delay above which a flight counts as delayed.
const DelayedMinutes = 15

// Collections written by the handler.
const (
	Airports = "airports"
	Routes   = "routes"
)

// AcceptQuotedNumbers makes the handler accept a delay or distance given as a JSON string that
// holds a decimal integer ("17"), as some upstream feeds send them. Off by default (such events
// fail their batch); the lenient build (`go build -tags lenient`, build/wasm/
// flightdelays-go-lenient.wasm) turns it on: it is the "fixed handler" of the dead-letter replay
// tests.
var AcceptQuotedNumbers bool

// Airport is the document of airports/<origin>.
type Airport struct {
	Flights, Delayed, TotalDelay, MaxDelay int64
}

// Decode reads a stored airports document (its fields in one scan).
func (a *Airport) Decode(doc []byte) error {
	f := airportFields
	f.Scan(doc)
	var ok1, ok2, ok3, ok4 bool
	a.Flights, ok1 = f.Int(0)
	a.Delayed, ok2 = f.Int(1)
	a.TotalDelay, ok3 = f.Int(2)
	a.MaxDelay, ok4 = f.Int(3)
	if !(ok1 && ok2 && ok3 && ok4) {
		return errors.New(`want {"flights":N,"delayed":N,"total_delay":N,"max_delay":N}`)
	}
	return nil
}

// Append appends the airports document of a to dst.
func (a *Airport) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("flights", a.Flights).Int("delayed", a.Delayed).Int("total_delay", a.TotalDelay).Int("max_delay", a.MaxDelay)
	return o.Bytes()
}

// Route is the document of routes/<origin>-<destination>.
type Route struct {
	Flights, TotalDistance int64
}

// Decode reads a stored routes document.
func (r *Route) Decode(doc []byte) error {
	f := routeFields
	f.Scan(doc)
	var ok1, ok2 bool
	r.Flights, ok1 = f.Int(0)
	r.TotalDistance, ok2 = f.Int(1)
	if !(ok1 && ok2) {
		return errors.New(`want {"flights":N,"total_distance":N}`)
	}
	return nil
}

// Append appends the routes document of r to dst.
func (r *Route) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("flights", r.Flights).Int("total_distance", r.TotalDistance)
	return o.Bytes()
}

// The handler's state. A WebAssembly instance runs one batch at a time; natively, run one
// guest.Native at a time with Handler.
var (
	fields        = guest.NewJSONFields("delay", "distance", "origin", "destination")
	airportFields = guest.NewJSONFields("flights", "delayed", "total_delay", "max_delay")
	routeFields   = guest.NewJSONFields("flights", "total_distance")
	airports      = guest.NewState(Airports, (*Airport).Decode, (*Airport).Append)
	routes        = guest.NewState(Routes, (*Route).Decode, (*Route).Append)
	routeKey      []byte // origin-destination, rebuilt for every event
)

// Handler is the projection's batch handler.
func Handler(b *guest.Batch) error {
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

		a, found := airports.Get(b, origin)
		if !found {
			a.MaxDelay = delay
		}
		a.Flights++
		if delay > DelayedMinutes {
			a.Delayed++
		}
		a.TotalDelay += delay
		a.MaxDelay = max(a.MaxDelay, delay)

		routeKey = append(append(append(routeKey[:0], origin...), '-'), dest...)
		r, _ := routes.Get(b, routeKey)
		r.Flights++
		r.TotalDistance += distance
	}
	return nil
}

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

func badEvent(ev *guest.Event, field, want string) error {
	return fmt.Errorf("flightdelays: event seq %s (partition key %q): field %q missing or not %s in data %.200q",
		ev.Seq, ev.PartitionKey, field, want, ev.Data)
}
