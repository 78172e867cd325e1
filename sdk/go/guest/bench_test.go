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
