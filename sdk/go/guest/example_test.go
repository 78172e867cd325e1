//go:build !wasip1

package guest_test

import (
	"errors"
	"fmt"

	"github.com/projhost/projhost/sdk/go/guest"
)

// Route is the document routes/<origin>-<destination>: {"flights":N,"total_distance":N}.
type Route struct{ Flights, TotalDistance int64 }

// Decode fills r from a stored document (called at the first Get of the document in a batch,
// unless the State kept r, unchanged, from the batch before).
func (r *Route) Decode(doc []byte) error {
	var ok1, ok2 bool
	r.Flights, ok1 = guest.JSONInt(doc, "flights")
	r.TotalDistance, ok2 = guest.JSONInt(doc, "total_distance")
	if !ok1 || !ok2 {
		return errors.New(`want {"flights":N,"total_distance":N}`)
	}
	return nil
}

// Append appends r's document to dst (called once per document when the handler returns).
func (r *Route) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("flights", r.Flights).Int("total_distance", r.TotalDistance)
	return o.Bytes()
}

// A handler's per-batch state: package variables, reused from batch to batch.
var (
	routes   = guest.NewState("routes", (*Route).Decode, (*Route).Append)
	fields   = guest.NewJSONFields("origin", "destination", "distance")
	routeKey []byte
)

// routesHandler keeps per-route totals of flight events. The route key is composed in one reused
// buffer; State.Get copies it.
func routesHandler(b *guest.Batch) error {
	for b.Next() {
		ev := b.Event()
		fields.Scan(ev.Data)
		origin, ok1 := fields.String(0)
		dest, ok2 := fields.String(1)
		distance, ok3 := fields.Int(2)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("event seq %s: want origin, destination and distance", ev.Seq)
		}
		routeKey = append(append(append(routeKey[:0], origin...), '-'), dest...)
		r, _ := routes.Get(b, routeKey)
		r.Flights++
		r.TotalDistance += distance
	}
	return nil
}

// A State keeps a collection's documents as Go values: Get decodes a document at its first touch
// in a batch (or takes the value the State kept, if the document is unchanged since the State
// wrote it), plain code changes it, and the batch writes each document once when the handler
// returns. In a handler's package main, register the handler with
// guest.Handle(routesHandler) in an init function; here it runs natively.
func ExampleState() {
	n := guest.NewNative(routesHandler)
	n.Set("routes", "SFO-LAX", []byte(`{"flights":10,"total_distance":3370}`))
	muts, err := n.Run("shardId-000000000000", []guest.Event{
		{Seq: []byte("1"), Data: []byte(`{"origin":"SFO","destination":"LAX","distance":337}`)},
		{Seq: []byte("2"), Data: []byte(`{"origin":"DTW","destination":"LAS","distance":1750}`)},
		{Seq: []byte("3"), Data: []byte(`{"origin":"SFO","destination":"LAX","distance":337}`)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range muts {
		fmt.Printf("%s/%s %s\n", m.Collection, m.Key, m.Doc)
	}
	// Output:
	// routes/SFO-LAX {"flights":12,"total_distance":4044}
	// routes/DTW-LAS {"flights":1,"total_distance":1750}
}

// Read, Put and Delete work on JSON bytes, one call per access; the batch keeps the last write
// of each key and reads its own writes.
func ExampleBatch_Read() {
	var doc []byte
	count := func(b *guest.Batch) error {
		for b.Next() {
			key := b.Event().PartitionKey
			var n int64
			if d, ok := b.Read("counts", key); ok {
				n, _ = guest.JSONInt(d, "count")
			}
			o := guest.NewObject(doc[:0])
			o.Int("count", n+1)
			doc = o.Bytes()
			b.Put("counts", key, doc)
		}
		return nil
	}
	n := guest.NewNative(count)
	muts, err := n.Run("shardId-000000000000", []guest.Event{
		{Seq: []byte("1"), PartitionKey: []byte("a")},
		{Seq: []byte("2"), PartitionKey: []byte("b")},
		{Seq: []byte("3"), PartitionKey: []byte("a")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range muts {
		fmt.Printf("%s/%s %s\n", m.Collection, m.Key, m.Doc)
	}
	// Output:
	// counts/a {"count":2}
	// counts/b {"count":1}
}
