//go:build !wasip1

package guest_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/sdk/go/guest"
)

// benchEvents returns n events over keys distinct partition keys (a fixed pseudo-random
// sequence), each with data {"amount":N}.
func benchEvents(n, keys int) []guest.Event {
	evs := make([]guest.Event, n)
	x := uint32(1)
	for i := range evs {
		x = x*1664525 + 1013904223
		evs[i] = guest.Event{
			Seq:          []byte(fmt.Sprint(i + 1)),
			PartitionKey: []byte(fmt.Sprintf("key-%04d", x%uint32(keys))),
			Data:         []byte(fmt.Sprintf(`{"amount":%d}`, x%1000)),
		}
	}
	return evs
}

// readPutHandler sums amounts per partition key with Read and Put on every event.
func readPutHandler() guest.Handler {
	var doc []byte
	return func(b *guest.Batch) error {
		for b.Next() {
			ev := b.Event()
			amount, _ := guest.JSONInt(ev.Data, "amount")
			var sum int64
			if d, ok := b.Read("sums", ev.PartitionKey); ok {
				sum, _ = guest.JSONInt(d, "v")
			}
			o := guest.NewObject(doc[:0])
			o.Int("v", sum+amount)
			doc = o.Bytes()
			b.Put("sums", ev.PartitionKey, doc)
		}
		return nil
	}
}

// stateHandler is readPutHandler written with a State.
func stateHandler() guest.Handler {
	sums := newDocs("sums")
	return func(b *guest.Batch) error {
		for b.Next() {
			ev := b.Event()
			amount, _ := guest.JSONInt(ev.Data, "amount")
			s, _ := sums.Get(b, ev.PartitionKey)
			s.V += amount
		}
		return nil
	}
}

// BenchmarkBatch runs 10,000 events over 300 keys through guest.Native without document
// validation (what runs inside WebAssembly, plus the native batch encoding and output
// application), by handler style and batch size.
func BenchmarkBatch(b *testing.B) {
	evs := benchEvents(10000, 300)
	for _, h := range []struct {
		name string
		h    func() guest.Handler
	}{{"ReadPut", readPutHandler}, {"State", stateHandler}} {
		for _, size := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", h.name, size), func(b *testing.B) {
				n := guest.NewNative(h.h(), guest.WithDocValidation(false))
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					for start := 0; start < len(evs); start += size {
						if _, err := n.Run("s", evs[start:min(start+size, len(evs))]); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(len(evs)*b.N), "cpu-ns/event")
			})
		}
	}
}

// cpuTime returns the process's user+system CPU time: on a shared machine, CPU time per event is
// steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFieldIndex runs a handler that reads the four fields of flightdelays from every event
// with a JSONFields (and sums them, nothing else) over batches of 100 events, through
// Native.RunBatchImports: "scan" without a field index, "index" with one (the batches encoded
// beforehand, the keys registered during an untimed first batch). Natively, so it shows the
// share of the guest's work the index takes off, not WebAssembly's figures.
func BenchmarkFieldIndex(b *testing.B) {
	evs := make([]guest.Event, 1000)
	airports := []string{"DTW", "LAS", "SFO", "HNL", "OAK", "PHX", "ORD", "ATL"}
	for i := range evs {
		evs[i] = guest.Event{Seq: []byte(fmt.Sprint(i + 1)), PartitionKey: []byte(airports[i%8]),
			Data: fmt.Appendf(nil, `{"date":"2001/01/%02d %02d:%02d","delay":%d,"distance":%d,"origin":"%s","destination":"%s"}`,
				i%28+1, i%24, i%60, i%200-20, 100+i*7%2500, airports[i%8], airports[(i/8)%8])}
	}
	fields := guest.NewJSONFields("delay", "distance", "origin", "destination")
	var sum int64
	h := func(b *guest.Batch) error {
		for b.Next() {
			fields.Scan(b.Event().Data)
			d, _ := fields.Int(0)
			km, _ := fields.Int(1)
			o, _ := fields.String(2)
			t, _ := fields.String(3)
			sum += d + km + int64(len(o)+len(t))
		}
		return nil
	}
	for _, indexed := range []bool{false, true} {
		name := "scan"
		if indexed {
			name = "index"
		}
		b.Run(name, func(b *testing.B) {
			n := guest.NewNative(h)
			host := &fieldHost{}
			imp := guest.Imports{}
			if indexed {
				imp.Field = host.Field
				if _, err := n.RunBatchImports(host.batch(b, evs[:1]), imp); err != nil {
					b.Fatal(err)
				}
			}
			var batches [][]byte
			for start := 0; start < len(evs); start += 100 {
				batches = append(batches, host.batch(b, evs[start:start+100]))
			}
			cpu0 := cpuTime()
			for b.Loop() {
				for _, batch := range batches {
					if _, err := n.RunBatchImports(batch, imp); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(evs)*b.N), "ns/event")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(len(evs)*b.N), "cpu-ns/event")
		})
	}
}
